#include "support/url.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace dist::support {
namespace {

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed init method URL '", text, "': ", why,
                   "; expected e.g. tcp://host:29500?rank=0&world_size=4, env://, or "
                   "file:///shared/dir/rendezvous?rank=0&world_size=4"));
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> Decode(absl::string_view text, absl::string_view part) {
  std::string out;
  for (size_t i = 0; i < part.size(); ++i) {
    if (part[i] == '%') {
      if (i + 2 >= part.size()) {
        return Bad(text, absl::StrCat("incomplete %-escape in '", part, "'"));
      }
      const int hi = HexDigit(part[i + 1]), lo = HexDigit(part[i + 2]);
      if (hi < 0 || lo < 0) {
        return Bad(text, absl::StrCat("bad %-escape in '", part, "'"));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (part[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(part[i]);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Url> ParseUrl(absl::string_view text) {
  Url url;
  url.text = std::string(text);
  const size_t sep = text.find("://");
  if (sep == absl::string_view::npos || sep == 0) {
    return Bad(text, "no scheme (the part before '://')");
  }
  url.scheme = absl::AsciiStrToLower(text.substr(0, sep));
  for (char c : url.scheme) {
    if (!absl::ascii_isalnum(c) && c != '+' && c != '-' && c != '.') {
      return Bad(text, absl::StrCat("scheme '", url.scheme, "' has invalid characters"));
    }
  }
  absl::string_view rest = text.substr(sep + 3);
  absl::string_view query;
  if (const size_t q = rest.find('?'); q != absl::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest.find('#') != absl::string_view::npos) {
    return Bad(text, "fragments ('#...') are not allowed");
  }
  absl::string_view authority = rest;
  if (const size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    authority = rest.substr(0, slash);
    url.path = std::string(rest.substr(slash));
  }
  if (authority.find('@') != absl::string_view::npos) {
    return Bad(text, "user info ('user@') is not allowed; pass a token with DIST_STORE_TOKEN");
  }
  absl::string_view port_text;
  bool has_port = false;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos)
      return Bad(text, "'[' without ']' around an IPv6 address");
    url.host = std::string(authority.substr(1, close - 1));
    if (url.host.empty()) return Bad(text, "empty IPv6 address in []");
    absl::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Bad(text, "expected ':port' after ']'");
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = authority.find(':');
    if (colon != absl::string_view::npos) {
      if (authority.find(':', colon + 1) != absl::string_view::npos) {
        return Bad(text, "an IPv6 address must be in brackets, e.g. tcp://[::1]:29500");
      }
      port_text = authority.substr(colon + 1);
      has_port = true;
      authority = authority.substr(0, colon);
    }
    url.host = std::string(authority);
  }
  if (has_port) {
    int port = 0;
    if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535 ||
        !absl::ascii_isdigit(port_text[0])) {
      return Bad(text, absl::StrCat("port '", port_text, "' is not a number in 1..65535"));
    }
    url.port = port;
  }
  if (!query.empty()) {
    for (absl::string_view item : absl::StrSplit(query, '&')) {
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      if (eq == absl::string_view::npos || eq == 0) {
        return Bad(text, absl::StrCat("query item '", item, "' is not key=value"));
      }
      absl::StatusOr<std::string> key = Decode(text, item.substr(0, eq));
      if (!key.ok()) return key.status();
      absl::StatusOr<std::string> value = Decode(text, item.substr(eq + 1));
      if (!value.ok()) return value.status();
      for (const auto& [seen, unused] : url.query) {
        if (seen == *key) return Bad(text, absl::StrCat("'", *key, "' is given twice"));
      }
      url.query.emplace_back(*key, *value);
    }
  }
  return url;
}

absl::StatusOr<Query> Query::From(const Url& url, const std::vector<std::string>& known) {
  for (const auto& [key, value] : url.query) {
    bool ok = false;
    for (const std::string& k : known) ok = ok || k == key;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("init method URL '", url.text, "' has unknown parameter '", key, "'; ",
                       url.scheme, ":// understands: ", absl::StrJoin(known, ", ")));
    }
  }
  Query query;
  query.url_ = url.text;
  query.entries_ = url.query;
  return query;
}

std::optional<std::string> Query::Get(const std::string& key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return v;
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<int>> Query::GetInt(const std::string& key, int min, int max) const {
  std::optional<std::string> text = Get(key);
  if (!text) return std::optional<int>();
  int value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat("init method URL '", url_, "': ", key, "='",
                                                   *text, "' is not an integer in ", min, "..",
                                                   max));
  }
  return std::optional<int>(value);
}

absl::StatusOr<bool> Query::GetBool(const std::string& key, bool fallback) const {
  std::optional<std::string> text = Get(key);
  if (!text) return fallback;
  const std::string lower = absl::AsciiStrToLower(*text);
  if (lower == "1" || lower == "true" || lower == "yes") return true;
  if (lower == "0" || lower == "false" || lower == "no") return false;
  return absl::InvalidArgumentError(absl::StrCat("init method URL '", url_, "': ", key, "='", *text,
                                                 "' is not a boolean; use 1 or 0"));
}

}  // namespace dist::support

#include "core/toml_text.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dist {
namespace {

// Decodes one UTF-8 character at text[i]; false for anything the standard
// does not allow (overlong forms, surrogates, beyond U+10FFFF, truncation),
// so no decoder downstream can turn malformed bytes into a character.
bool DecodeUtf8(absl::string_view text, size_t i, char32_t* c, size_t* length) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  size_t n;
  char32_t value;
  if (lead < 0x80) {
    n = 1, value = lead;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2, value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3, value = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4, value = lead & 0x07;
  } else {
    return false;
  }
  if (i + n > text.size()) return false;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return false;
    value = (value << 6) | (byte(k) & 0x3F);
  }
  static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kSmallest[n] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) {
    return false;
  }
  *c = value;
  *length = n;
  return true;
}

class Rewriter {
 public:
  Rewriter(absl::string_view text, absl::string_view path) : text_(text), path_(path) {}

  absl::StatusOr<std::string> Run() {
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (c == '#') {
        if (absl::Status s = Comment(); !s.ok()) return s;
      } else if (c == '"' || c == '\'') {
        if (absl::Status s = String(c); !s.ok()) return s;
      } else {
        char32_t character;
        size_t length;
        if (absl::Status s = Next(&character, &length); !s.ok()) return s;
        if (character >= 0x80) {
          return Error("a non-ASCII character outside a string or comment; quote it");
        }
        if (c == '\n') ++line_;
        out_.push_back(c);
        ++i_;
      }
    }
    return std::move(out_);
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path_, " line ", line_, ": invalid TOML: ", what));
  }

  // The character at i_, checked: valid UTF-8 and no control character
  // TOML forbids (tab, CR and LF are allowed).
  absl::Status Next(char32_t* c, size_t* length) const {
    if (!DecodeUtf8(text_, i_, c, length)) {
      return Error("the bytes here are not UTF-8; is this a text file?");
    }
    if ((*c < 0x20 && *c != '\t' && *c != '\r' && *c != '\n') || *c == 0x7f) {
      return Error(absl::StrFormat("control character 0x%02x; is this a text file?", *c));
    }
    return absl::OkStatus();
  }

  static std::string Escape(char32_t c) { return absl::StrFormat("\\u%04X", c); }

  absl::Status Comment() {
    while (i_ < text_.size() && text_[i_] != '\n') {
      char32_t c;
      size_t length;
      if (absl::Status s = Next(&c, &length); !s.ok()) return s;
      // What a comment says does not matter to the parser, only that it
      // never meets a character its table gets wrong.
      if (TomlWhitespaceTableMisses(c)) {
        out_.push_back('?');
      } else {
        absl::StrAppend(&out_, text_.substr(i_, length));
      }
      i_ += length;
    }
    return absl::OkStatus();
  }

  // How many of `quote` stand at i_.
  size_t QuoteRun(char quote) const {
    size_t n = 0;
    while (i_ + n < text_.size() && text_[i_ + n] == quote) ++n;
    return n;
  }

  // A string from its opening quote to its closing one. It is copied as it
  // is unless it holds a character the table gets wrong; then it is written
  // as a basic string with that character escaped.
  absl::Status String(char quote) {
    const bool literal = quote == '\'';
    const bool multi = QuoteRun(quote) >= 3;
    const size_t delimiter = multi ? 3 : 1;
    const int first_line = line_;
    i_ += delimiter;
    std::string verbatim, rewritten;
    bool needs_rewrite = false;
    const auto add = [&](absl::string_view raw, absl::string_view as_basic) {
      absl::StrAppend(&verbatim, raw);
      absl::StrAppend(&rewritten, as_basic);
    };
    while (true) {
      if (i_ >= text_.size() || (!multi && text_[i_] == '\n')) {
        line_ = first_line;
        return Error("a string that never ends; close its quote on the same line");
      }
      const char c = text_[i_];
      if (c == quote) {
        const size_t run = QuoteRun(quote);
        if (!multi || run >= 3) {
          // A multi-line string may end in up to two quotes of its own.
          if (multi && run > 5) return Error("too many quotes at the end of a string");
          const size_t own = multi ? run - 3 : 0;
          for (size_t k = 0; k < own; ++k) add(std::string(1, quote), literal ? "'" : "\\\"");
          i_ += own + delimiter;
          break;
        }
      }
      if (c == '\\' && !literal) {
        if (i_ + 1 >= text_.size()) {
          line_ = first_line;
          return Error("a string that never ends; close its quote");
        }
        // The escaped character is checked like any other (UTF-8, control
        // characters), and must be ASCII to be an escape at all.
        ++i_;
        char32_t escaped;
        size_t length;
        if (absl::Status s = Next(&escaped, &length); !s.ok()) return s;
        if (escaped >= 0x80) {
          return Error("a backslash before a non-ASCII character is not an escape");
        }
        if (escaped == '\n') ++line_;
        add(text_.substr(i_ - 1, 2), text_.substr(i_ - 1, 2));
        ++i_;
        continue;
      }
      char32_t character;
      size_t length;
      if (absl::Status s = Next(&character, &length); !s.ok()) return s;
      const absl::string_view raw = text_.substr(i_, length);
      if (c == '\n') ++line_;
      if (TomlWhitespaceTableMisses(character)) {
        needs_rewrite = true;
        add(raw, Escape(character));
      } else if (literal && (c == '\\' || c == '"')) {
        add(raw, c == '\\' ? "\\\\" : "\\\"");
      } else {
        add(raw, raw);
      }
      i_ += length;
    }
    const std::string open(delimiter, needs_rewrite ? '"' : quote);
    absl::StrAppend(&out_, open, needs_rewrite ? rewritten : verbatim, open);
    return absl::OkStatus();
  }

  const absl::string_view text_;
  const absl::string_view path_;
  size_t i_ = 0;
  int line_ = 1;
  std::string out_;
};

}  // namespace

bool TomlWhitespaceTableMisses(char32_t c) {
  // The same steps as toml++ 3.3's is_non_ascii_horizontal_whitespace
  // (toml++/impl/unicode_autogenerated.h): a character that passes its
  // range check and its first bitmask but is neither one of its three
  // named characters nor in one of its two switch cases falls through to
  // TOML_UNREACHABLE.
  if (c < 0xA0 || c > 0xFEFF) return false;
  const uint64_t child = (static_cast<uint64_t>(c) - 0xA0) / 0x3FA;
  if ((uint64_t{1} << child) & 0x7FFFFFFFFFFFF75Eull) return false;
  if (c == 0xA0 || c == 0x3000 || c == 0xFEFF) return false;
  return child != 0x05 && child != 0x07;
}

absl::StatusOr<std::string> SafeTomlText(absl::string_view text, absl::string_view path) {
  return Rewriter(text, path).Run();
}

}  // namespace dist

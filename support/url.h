// Parsing of init-method URLs: scheme://host:port/path?key=value&...
#ifndef DIST_SUPPORT_URL_H_
#define DIST_SUPPORT_URL_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dist::support {

struct Url {
  std::string text;                                        // as given, for error messages
  std::string scheme;                                      // lower case
  std::string host;                                        // without IPv6 brackets; may be empty
  int port = -1;                                           // -1: not given
  std::string path;                                        // "/..." or empty
  std::vector<std::pair<std::string, std::string>> query;  // percent-decoded
};

// Errors say what is wrong with which part and show the expected form.
absl::StatusOr<Url> ParseUrl(absl::string_view text);

// The query of one URL, checked against the keys a scheme knows (so a typo
// such as ?wrold_size=4 is an error, not silently ignored).
class Query {
 public:
  static absl::StatusOr<Query> From(const Url& url, const std::vector<std::string>& known);
  std::optional<std::string> Get(const std::string& key) const;
  // An integer in [min, max], or nullopt when absent.
  absl::StatusOr<std::optional<int>> GetInt(const std::string& key, int min, int max) const;
  // 1/0/true/false/yes/no; `fallback` when absent.
  absl::StatusOr<bool> GetBool(const std::string& key, bool fallback) const;

 private:
  std::string url_;
  std::vector<std::pair<std::string, std::string>> entries_;
};

}  // namespace dist::support

#endif  // DIST_SUPPORT_URL_H_

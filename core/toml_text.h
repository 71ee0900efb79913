// The text of a config file, made safe for toml++ before it is parsed.
//
// Debian 12's toml++ 3.3 reaches TOML_UNREACHABLE (undefined behaviour in a
// release build) when its whitespace table is asked about some non-ASCII
// characters (U+00A1..U+0499, U+2C5E..U+3057 but U+3000, U+FB26..U+FEFE:
// Latin-1 letters, Greek, Cyrillic, some CJK punctuation and kana),
// and it asks wherever it might find whitespace: between tokens, and while
// it reports a malformed value. tests/fuzz/config_fuzz found both. Rather
// than guess where the parser will look, SafeTomlText returns a document in
// which no such character is left at all: inside strings it becomes a
// \uXXXX escape (a literal string turns into the equal basic string), in
// comments it becomes '?', and anywhere else non-ASCII text is refused,
// as TOML refuses it. Control characters TOML forbids are refused too (the
// parser asserted on a NUL after '[').
#ifndef DIST_CORE_TOML_TEXT_H_
#define DIST_CORE_TOML_TEXT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dist {

// True for the characters toml++ 3.3's whitespace table mishandles.
bool TomlWhitespaceTableMisses(char32_t c);

// `text` as read from `path` (named in errors), rewritten so that it parses
// to the same values and holds none of the characters above.
absl::StatusOr<std::string> SafeTomlText(absl::string_view text, absl::string_view path);

}  // namespace dist

#endif  // DIST_CORE_TOML_TEXT_H_

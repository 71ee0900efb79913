// SafeTomlText: the config text handed to toml++ holds none of the
// characters its whitespace table gets wrong, and parses to the same values.
#include "core/toml_text.h"

#include <string>

#include "gtest/gtest.h"
#include "toml++/toml.h"

namespace dist {
namespace {

std::string Safe(const std::string& text) {
  absl::StatusOr<std::string> safe = SafeTomlText(text, "t.toml");
  EXPECT_TRUE(safe.ok()) << safe.status();
  return safe.ok() ? *safe : "";
}

std::string Refusal(const std::string& text) {
  absl::StatusOr<std::string> safe = SafeTomlText(text, "t.toml");
  EXPECT_FALSE(safe.ok()) << "accepted: " << text;
  return safe.ok() ? "" : std::string(safe.status().message());
}

std::string Value(const std::string& text, const char* key) {
  toml::table table = toml::parse(Safe(text), std::string_view("t.toml"));
  return table[key].value<std::string>().value_or("<missing>");
}

// Under --config=asan (UBSan) this fails if the predicate lets through a
// character that sends toml++'s own function to TOML_UNREACHABLE.
TEST(TomlTextTest, EveryCharacterThePredicateLetsThroughIsSafeForTomlxx) {
  size_t misses = 0;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (TomlWhitespaceTableMisses(c)) {
      ++misses;
      continue;
    }
    (void)toml::impl::is_non_ascii_horizontal_whitespace(c);
  }
  // U+00A1..U+0499, U+2C5E..U+3057 less U+3000, U+FB26..U+FEFE.
  EXPECT_EQ(misses, (0x499 - 0xA1 + 1) + (0x3057 - 0x2C5E + 1 - 1) + (0xFEFE - 0xFB26 + 1));
  EXPECT_TRUE(TomlWhitespaceTableMisses(U'\u03BE'));   // Greek xi
  EXPECT_TRUE(TomlWhitespaceTableMisses(U'\u0416'));   // Cyrillic zhe
  EXPECT_TRUE(TomlWhitespaceTableMisses(U'\u00E9'));   // Latin e acute
  EXPECT_FALSE(TomlWhitespaceTableMisses(U'\u0500'));  // fine: past the first range
  EXPECT_FALSE(TomlWhitespaceTableMisses(U'\u4E2D'));  // CJK, outside the range
}

TEST(TomlTextTest, StringsKeepTheirValues) {
  EXPECT_EQ(Value("a = \"x\xce\xbey\"\n", "a"), "x\xce\xbey");            // basic
  EXPECT_EQ(Value("a = 'C:\\p\xd0\x96\"q'\n", "a"), "C:\\p\xd0\x96\"q");  // literal
  EXPECT_EQ(Value("a = '''\nl1\xce\xbe\nl2 \\ \"\"\" '''\n", "a"), "l1\xce\xbe\nl2 \\ \"\"\" ");
  EXPECT_EQ(Value("a = '''x\xce\xbe'''''\n", "a"), "x\xce\xbe''");  // two own quotes
  EXPECT_EQ(Value("a = \"\"\"x\xce\xbe\\\"\"\"\"\"\n", "a"),
            "x\xce\xbe\"\"");                                        // \" then one own quote
  EXPECT_EQ(Value("a = \"t\\tx\xce\xbe\"\n", "a"), "t\tx\xce\xbe");  // escapes survive
  EXPECT_EQ(Value("\"k\xce\xbe\" = \"v\"\n", "k\xce\xbe"), "v");     // a quoted key
  EXPECT_EQ(Value("a = \"\xe4\xb8\xad\"\n", "a"), "\xe4\xb8\xad");   // untouched text
  // Text without such characters is handed on byte for byte.
  const std::string plain = "# \xe4\xb8\xad\na = 'x\\y' # z\n[t]\nb = \"\"\"q\"\"\"\n";
  EXPECT_EQ(Safe(plain), plain);
}

TEST(TomlTextTest, CommentsLoseTheCharactersOnly) {
  EXPECT_EQ(Safe("# \xce\xbe\xce\xbe ok\na = 1\n"), "# ?? ok\na = 1\n");
}

TEST(TomlTextTest, RefusesWhatTomlRefusesWithTheLine) {
  EXPECT_NE(Refusal("a = 1\nb = \xce\xbe\n").find("t.toml line 2: invalid TOML: a non-ASCII"),
            std::string::npos);
  EXPECT_NE(Refusal("a = \"x\xff\"\n").find("not UTF-8"), std::string::npos);
  EXPECT_NE(Refusal("a = \"x\xc0\xbe\"\n").find("not UTF-8"), std::string::npos);     // overlong
  EXPECT_NE(Refusal("a = \"\xed\xa0\x80\"\n").find("not UTF-8"), std::string::npos);  // surrogate
  EXPECT_NE(Refusal(std::string("[\0x]\n", 5)).find("control character 0x00"), std::string::npos);
  EXPECT_NE(Refusal("a = \"open\nb = 1\n").find("line 1: invalid TOML: a string that never ends"),
            std::string::npos);
  EXPECT_NE(Refusal("a = \"x\\").find("never ends"), std::string::npos);
  EXPECT_NE(Refusal("a = \"\\\xce\xbe\"\n").find("not an escape"), std::string::npos);
  EXPECT_NE(Refusal(std::string("a = \"\\\0\"\n", 8)).find("control character 0x00"),
            std::string::npos);  // an escaped NUL is still a NUL
  EXPECT_NE(Refusal("a = '''x''''''\n").find("too many quotes"), std::string::npos);
}

// Found by tests/fuzz/config_fuzz: a malformed value running into a string
// sent toml++'s error report through its whitespace table.
TEST(TomlTextTest, MalformedValueBeforeAStringIsAParseError) {
  const std::string text = "backend =0\"cpu\xc6\x95loo,c\"\ntimeolee_l\" t =";
  EXPECT_NE(Refusal(text).find("never ends"), std::string::npos);
  EXPECT_THROW(toml::parse(Safe("backend =0\"cpu\xc6\x95loo,c\"\n"), std::string_view("t.toml")),
               toml::parse_error);
}

}  // namespace
}  // namespace dist

#include "tools/distbench/byte_size.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace distbench {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  const std::string original(rest);
  if (!rest.empty() && (rest.back() == 'B' || rest.back() == 'b')) {
    rest.remove_suffix(1);
  }
  uint64_t multiplier = 1;
  if (!rest.empty()) {
    switch (absl::ascii_toupper(static_cast<unsigned char>(rest.back()))) {
      case 'K':
        multiplier = uint64_t{1} << 10;
        break;
      case 'M':
        multiplier = uint64_t{1} << 20;
        break;
      case 'G':
        multiplier = uint64_t{1} << 30;
        break;
      default:
        multiplier = 0;
        break;
    }
    if (multiplier != 0) {
      rest.remove_suffix(1);
    } else {
      multiplier = 1;
    }
  }
  uint64_t number = 0;
  if (rest.empty() || !absl::SimpleAtoi(rest, &number) || rest[0] == '-' || rest[0] == '+') {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", original,
        "' is not a size; write bytes with an optional K, M or G suffix (8, 1K, 64M)"));
  }
  if (number > std::numeric_limits<uint64_t>::max() / multiplier) {
    return absl::InvalidArgumentError(absl::StrCat("'", original, "' is too large"));
  }
  return number * multiplier;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr struct {
    int shift;
    const char* suffix;
  } kUnits[] = {{30, "G"}, {20, "M"}, {10, "K"}};
  for (const auto& unit : kUnits) {
    const uint64_t step = uint64_t{1} << unit.shift;
    if (bytes >= step && bytes % step == 0) return absl::StrCat(bytes / step, unit.suffix);
  }
  return absl::StrCat(bytes);
}

bool AbslParseFlag(absl::string_view text, ByteSize* size, std::string* error) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) {
    *error = std::string(bytes.status().message());
    return false;
  }
  size->bytes = *bytes;
  return true;
}

std::string AbslUnparseFlag(ByteSize size) { return FormatByteSize(size.bytes); }

}  // namespace distbench

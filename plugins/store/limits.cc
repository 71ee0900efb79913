#include "plugins/store/limits.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dist::store {

absl::Status ValidateKey(absl::string_view key) {
  if (key.empty()) {
    return absl::InvalidArgumentError("store key is empty; use a non-empty key");
  }
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store key of ", key.size(), " bytes is longer than the limit of ",
                     kMaxKeyBytes, " bytes (DIST_STORE_MAX_KEY_BYTES); use a shorter key"));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view key, size_t size) {
  if (size > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of ", size, " bytes for store key '", key,
                     "' is larger than the limit of ", kMaxValueBytes,
                     " bytes (DIST_STORE_MAX_VALUE_BYTES); exchange large data through the "
                     "backend, not the store"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseCounter(absl::string_view key, absl::string_view value) {
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("store key '", key, "' holds '", value.substr(0, 32),
                     "', not a decimal integer, so add() cannot count on it; use a "
                     "separate key for counters"));
  }
  return parsed;
}

std::string DescribeKeys(const std::vector<std::string>& keys) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < keys.size() && i < kShown; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", "'", keys[i], "'");
  }
  if (keys.size() > kShown) {
    absl::StrAppend(&out, " and ", keys.size() - kShown, " more");
  }
  return out;
}

}  // namespace dist::store

// Size limits and value rules shared by every store implementation.
#ifndef DIST_PLUGINS_STORE_LIMITS_H_
#define DIST_PLUGINS_STORE_LIMITS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dist/store.h"

namespace dist::store {

inline constexpr size_t kMaxKeyBytes = DIST_STORE_MAX_KEY_BYTES;
inline constexpr size_t kMaxValueBytes = DIST_STORE_MAX_VALUE_BYTES;

absl::Status ValidateKey(absl::string_view key);
absl::Status ValidateValue(absl::string_view key, size_t size);

// The integer held by an `add` counter (decimal ASCII); a missing key is 0.
absl::StatusOr<int64_t> ParseCounter(absl::string_view key, absl::string_view value);

// "a, b, c and 7 more" — keeps timeout messages to one readable line.
std::string DescribeKeys(const std::vector<std::string>& keys);

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_LIMITS_H_

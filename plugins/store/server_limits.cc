#include "plugins/store/server_limits.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace dist::store {
namespace {

constexpr char kNames[] =
    "max_pending_connections, max_connections, handshake_timeout, stall_timeout, "
    "max_request_bytes, max_keys_per_request, max_buffered_bytes, max_store_bytes, "
    "max_log_lines, fd_reserve";

absl::Status BadValue(absl::string_view name, absl::string_view value, absl::string_view form) {
  return absl::InvalidArgumentError(
      absl::StrCat("store limit ", name, "='", value, "' is not ", form));
}

template <typename T>
absl::Status SetNumber(T* field, absl::string_view name, absl::string_view value) {
  uint64_t number = 0;
  if (!absl::SimpleAtoi(value, &number) || number > static_cast<uint64_t>(T(~T(0)) >> 1)) {
    return BadValue(name, value, "a whole number");
  }
  *field = static_cast<T>(number);
  return absl::OkStatus();
}

absl::Status SetDuration(absl::Duration* field, absl::string_view name, absl::string_view value) {
  double seconds = 0;
  absl::Duration duration;
  if (absl::SimpleAtod(value, &seconds) && seconds >= 0 && seconds < 1e9) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(value, &duration) || duration == absl::InfiniteDuration()) {
    return BadValue(name, value, "a duration (seconds, or 500ms, 5s, 1m)");
  }
  *field = duration;
  return absl::OkStatus();
}

}  // namespace

absl::Status SetLimit(TcpStoreServerLimits* limits, absl::string_view name,
                      absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  if (name == "max_pending_connections") {
    return SetNumber(&limits->max_pending_connections, name, value);
  }
  if (name == "max_connections") return SetNumber(&limits->max_connections, name, value);
  if (name == "handshake_timeout") return SetDuration(&limits->handshake_timeout, name, value);
  if (name == "stall_timeout") return SetDuration(&limits->stall_timeout, name, value);
  if (name == "max_request_bytes") return SetNumber(&limits->max_request_bytes, name, value);
  if (name == "max_keys_per_request") {
    return SetNumber(&limits->max_keys_per_request, name, value);
  }
  if (name == "max_buffered_bytes") return SetNumber(&limits->max_buffered_bytes, name, value);
  if (name == "max_store_bytes") return SetNumber(&limits->max_store_bytes, name, value);
  if (name == "max_log_lines") return SetNumber(&limits->max_log_lines, name, value);
  if (name == "fd_reserve") return SetNumber(&limits->fd_reserve, name, value);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown store limit '", name, "'; the limits are ", kNames));
}

absl::Status CheckLimits(const TcpStoreServerLimits& limits) {
  const auto out_of_range = [](absl::string_view name, absl::string_view rule) {
    return absl::InvalidArgumentError(
        absl::StrCat("store limit ", name, " is out of range: it must be ", rule));
  };
  if (limits.max_pending_connections < 1) return out_of_range("max_pending_connections", ">= 1");
  if (limits.max_connections < 1) return out_of_range("max_connections", ">= 1");
  if (limits.handshake_timeout <= absl::ZeroDuration()) {
    return out_of_range("handshake_timeout", "> 0");
  }
  if (limits.stall_timeout <= absl::ZeroDuration()) return out_of_range("stall_timeout", "> 0");
  if (limits.max_request_bytes < 1024) return out_of_range("max_request_bytes", ">= 1024");
  if (limits.max_keys_per_request < 1) return out_of_range("max_keys_per_request", ">= 1");
  if (limits.max_buffered_bytes < 64 * 1024) {
    return out_of_range("max_buffered_bytes", ">= 65536");
  }
  if (limits.max_log_lines < 0) return out_of_range("max_log_lines", ">= 0");
  if (limits.fd_reserve < -1) return out_of_range("fd_reserve", ">= 0, or -1 for the default");
  return absl::OkStatus();
}

int64_t FdReserve(const TcpStoreServerLimits& limits, int64_t open_files_limit) {
  if (limits.fd_reserve >= 0) return limits.fd_reserve;
  return std::max<int64_t>(64, open_files_limit / 4);
}

}  // namespace dist::store

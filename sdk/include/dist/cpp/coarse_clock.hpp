// dist SDK, C++ side: the wall clock to a few milliseconds (the kernel's
// tick), for deadlines on paths that run per operation: a read costs about
// 4 ns here, against about 58 for absl::Now, and an operation that never
// waits reads no other clock. Header-only; Abseil only.
#ifndef DIST_CPP_COARSE_CLOCK_HPP_
#define DIST_CPP_COARSE_CLOCK_HPP_

#include <time.h>

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"

namespace dist {

inline int64_t CoarseNowNanos() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

// absl::FromUnixNanos is inline; absl::TimeFromTimespec calls into Abseil.
inline absl::Time CoarseNow() { return absl::FromUnixNanos(CoarseNowNanos()); }

// CoarseNow() + `timeout_ms`, by integer arithmetic: adding an
// absl::Duration to an absl::Time is a call into the (out of line) Abseil
// library. Saturates to the infinite future.
inline absl::Time CoarseDeadline(int64_t timeout_ms) {
  // Far beyond any real timeout, and small enough that now (about 2^61 ns
  // since the epoch) plus it in nanoseconds cannot overflow.
  constexpr int64_t kLongestMs = int64_t{1} << 40;  // 35 years
  if (timeout_ms > kLongestMs) return absl::InfiniteFuture();
  return absl::FromUnixNanos(CoarseNowNanos() + std::max<int64_t>(timeout_ms, 0) * 1000000);
}

}  // namespace dist

#endif  // DIST_CPP_COARSE_CLOCK_HPP_

#include "core/trace_clock.h"

#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace dist {
namespace {

bool InvariantCounter() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000007u) return false;
  if (__get_cpuid(0x80000007u, &a, &b, &c, &d) == 0) return false;
  return (d & (1u << 8)) != 0;
#else
  return false;
#endif
}

// A counter reading and the wall clock at (about) the same moment: the
// counter is read on both sides of the clock and the middle taken.
void ReadAnchor(uint64_t* ticks, int64_t* ns) {
#if defined(__x86_64__) || defined(__i386__)
  const uint64_t before = __rdtsc();
  *ns = TraceClock::WallNanos();
  const uint64_t after = __rdtsc();
  *ticks = before + (after - before) / 2;
#else
  *ticks = 0;
  *ns = TraceClock::WallNanos();
#endif
}

}  // namespace

int64_t TraceClock::WallNanos() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

TraceClock::TraceClock() : counter_(InvariantCounter()) {
  if (counter_) ReadAnchor(&anchor_ticks_, &anchor_ns_);
}

TraceClock::ToWall TraceClock::Converter() const {
  ToWall to_wall;
  to_wall.counter_ = counter_;
  if (!counter_) return to_wall;
  uint64_t ticks = 0;
  int64_t ns = 0;
  ReadAnchor(&ticks, &ns);
  to_wall.anchor_ticks_ = anchor_ticks_;
  to_wall.anchor_ns_ = anchor_ns_;
  // Under a microsecond between the anchors says little about the rate:
  // then every stamp is within that microsecond anyway.
  if (ticks > anchor_ticks_ && ns - anchor_ns_ >= 1000) {
    to_wall.ns_per_tick_ = static_cast<double>(ns - anchor_ns_) / (ticks - anchor_ticks_);
  }
  return to_wall;
}

int64_t TraceClock::ToWall::Micros(uint64_t stamp) const {
  if (!counter_) return static_cast<int64_t>(stamp) / 1000;
  const double since = static_cast<double>(static_cast<int64_t>(stamp - anchor_ticks_));
  return (anchor_ns_ + static_cast<int64_t>(since * ns_per_tick_)) / 1000;
}

}  // namespace dist

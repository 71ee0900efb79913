// The flight recorder's timestamps. Every operation takes two, so taking
// one must cost next to nothing: where the CPU's time-stamp counter is
// invariant (it ticks at one rate and never stops; CPUID 0x80000007 EDX
// bit 8), a timestamp is the counter itself (12 ns here, against 28 for
// clock_gettime through the vDSO and 58 for absl::Now), and a dump turns it
// into wall-clock time. Elsewhere a timestamp is clock_gettime's wall-clock
// nanoseconds.
#ifndef DIST_CORE_TRACE_CLOCK_H_
#define DIST_CORE_TRACE_CLOCK_H_

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace dist {

class TraceClock {
 public:
  // Takes the first anchor: a (counter, wall clock) pair read together.
  TraceClock();

  uint64_t Now() const {
#if defined(__x86_64__) || defined(__i386__)
    if (counter_) return __rdtsc();
#endif
    return static_cast<uint64_t>(WallNanos());
  }

  // Wall-clock microseconds of the timestamps taken so far: the counter's
  // rate comes from the first anchor and a second one taken now (so it is
  // exact at both, and the counter's drift against the wall clock in
  // between is spread evenly).
  class ToWall {
   public:
    int64_t Micros(uint64_t stamp) const;

   private:
    friend class TraceClock;
    bool counter_ = false;
    uint64_t anchor_ticks_ = 0;
    int64_t anchor_ns_ = 0;
    double ns_per_tick_ = 1.0;
  };
  ToWall Converter() const;

  static int64_t WallNanos();

 private:
  bool counter_ = false;  // timestamps are counter ticks
  uint64_t anchor_ticks_ = 0;
  int64_t anchor_ns_ = 0;
};

}  // namespace dist

#endif  // DIST_CORE_TRACE_CLOCK_H_

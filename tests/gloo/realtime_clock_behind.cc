// Linked into a test binary, this definition of clock_gettime replaces
// libc's for the whole process, absl's and libstdc++'s clocks included: the
// wall clock user code reads lags the kernel's by 5 ms. The kernel still
// times futex waits on its own wall clock, so an absl::Mutex wait with a
// deadline returns while absl::Now() reads 5 ms before that deadline: the
// skew that a loaded host shows now and then (absl::Now() interpolates the
// kernel's clock), made certain. Code that took such a return for "not
// timed out yet" misbehaved only on loaded hosts; under this clock it
// misbehaves every time.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace {
constexpr long kLagNanoseconds = 5'000'000;
constexpr long kNanosecondsPerSecond = 1'000'000'000;
}  // namespace

extern "C" int clock_gettime(clockid_t clock, struct timespec* now) {
  // The system call itself: libc's function is the one this replaces.
  const int rc = static_cast<int>(syscall(SYS_clock_gettime, clock, now));
  if (rc == 0 && clock == CLOCK_REALTIME) {
    now->tv_nsec -= kLagNanoseconds;
    if (now->tv_nsec < 0) {
      now->tv_nsec += kNanosecondsPerSecond;
      now->tv_sec -= 1;
    }
  }
  return rc;
}

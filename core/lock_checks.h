// Abseil's lock-order checking in the processes dist runs in.
#ifndef DIST_CORE_LOCK_CHECKS_H_
#define DIST_CORE_LOCK_CHECKS_H_

namespace dist {

// Turns off Abseil's mutex deadlock detection once per process, unless
// DIST_ABSL_DEADLOCK_DETECTION=1 keeps it.
//
// Why: Debian's libabsl is built without NDEBUG, so absl::Mutex runs its
// debug-only lock-order graph (GraphCycles) on every Lock and Unlock and
// aborts the process when it finds a cycle. In a library that lives in other
// people's processes that is both a way to kill the host and most of the
// cost of a small operation: a 1-rank 8 B shm all_reduce through the C API
// takes 9,800 instructions with it and 6,100 without (callgrind). The
// setting is process-wide; a host that debugs its own locks with it sets the
// variable to keep it.
void ConfigureAbslLockChecks();

}  // namespace dist

#endif  // DIST_CORE_LOCK_CHECKS_H_

// Waiting on a non-blocking NCCL communicator. Every communicator here is
// created with blocking=0, so any NCCL call may return ncclInProgress and the
// caller polls ncclCommGetAsyncError until the state settles. Polling (rather
// than blocking inside NCCL) is what lets a deadline and an abort interrupt
// init, split, enqueue and finalize, so that no rank hangs.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_NCCL_POLL_H_
#define DIST_PLUGINS_BACKENDS_NCCL_NCCL_POLL_H_

#include <nccl.h>

#include <atomic>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dist_nccl {

// Polls `comm` until it leaves ncclInProgress. OK when it settles on
// ncclSuccess; the NCCL error (naming `what`) when it fails;
// DEADLINE_EXCEEDED after `deadline`; ABORTED as soon as *stop becomes true
// (stop may be NULL). The caller aborts the communicator on any error.
absl::Status AwaitNccl(ncclComm_t comm, absl::Time deadline, const std::atomic<bool>* stop,
                       absl::string_view what);

// Sleeps a little longer each call, from a yield up to `cap`; for polling
// loops that must react within microseconds at first but not burn a core.
class Backoff {
 public:
  explicit Backoff(absl::Duration cap = absl::Milliseconds(1)) : cap_(cap) {}
  void Pause();

 private:
  absl::Duration cap_;
  int rounds_ = 0;
  absl::Duration sleep_ = absl::Microseconds(5);
};

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_NCCL_POLL_H_

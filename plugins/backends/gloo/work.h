// The completion state of one operation, shared by the communicator (which
// completes it) and the caller's handle (which waits on it). The handle may
// go away first (work_destroy before completion): the state lives on until
// both sides let go.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_WORK_H_
#define DIST_PLUGINS_BACKENDS_GLOO_WORK_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dist_gloo {

class Work {
 public:
  // Marks the work done with a copy of `status` that shares nothing with it
  // (the caller may complete several works with one error and release it
  // last, after a waiter read this work's copy: TSan cannot see Abseil's
  // reference count order that). Only the first call counts.
  void Complete(const absl::Status& status);

  bool done() const;

  // The operation's status once done; DeadlineExceeded after `timeout`
  // while it is still pending.
  absl::Status Wait(absl::Duration timeout) const;

  // Non-blocking: *done and, once done, the operation's status.
  absl::Status Test(bool* done) const;

 private:
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_WORK_H_

// One issued operation's completion, shared by the worker (which completes
// it) and the caller's handle (which may be destroyed first).
#ifndef DIST_PLUGINS_BACKENDS_SHM_WORK_H_
#define DIST_PLUGINS_BACKENDS_SHM_WORK_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"

namespace dist_shm {

// Lets a caller that waits run its operation itself (Communicator::
// TryRunInline), and outlives the communicator: Close() (from its
// destructor) makes later calls no-ops.
class InlineGate {
 public:
  explicit InlineGate(std::function<bool(const void* work, absl::Duration timeout)> run)
      : run_(std::move(run)) {}
  // Never blocks behind another caller's inline run (that one may take
  // as long as its timeout): then the worker runs this one.
  bool TryRun(const void* work, absl::Duration timeout) {
    if (!mu_.TryLock()) return false;
    const bool ran = run_ ? run_(work, timeout) : false;
    mu_.Unlock();
    return ran;
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    run_ = nullptr;
  }

 private:
  absl::Mutex mu_;
  std::function<bool(const void*, absl::Duration)> run_ ABSL_GUARDED_BY(mu_);
};

class Work {
 public:
  // `what`: a static name (dist_collective_name), not copied.
  Work(const char* what, std::string group, std::shared_ptr<InlineGate> gate = nullptr)
      : what_(what), group_(std::move(group)), gate_(std::move(gate)) {}

  // Keeps a copy that shares nothing with `status`: the completing thread
  // may hold the same error for other works, and its last release must not
  // free what a waiter reads (TSan cannot see Abseil's reference count).
  void Complete(const absl::Status& status) {
    absl::Status unshared = dist::UnsharedCopy(status);
    absl::MutexLock lock(&mu_);
    status_ = std::move(unshared);
    done_ = true;
  }

  // The operation's status once done; DEADLINE_EXCEEDED while it still runs
  // after `timeout` (the work stays pending).
  absl::Status Wait(absl::Duration timeout) {
    // A blocking call: run the operation on this thread if the
    // communicator lets us (no thread hand-off), else wait for the worker.
    if (gate_ != nullptr && !Done()) gate_->TryRun(this, timeout);
    absl::MutexLock lock(&mu_);
    // Done already (it ran here): no deadline to compute, no clock read.
    if (!done_ && !mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("shm: ", what_, " on group '", group_, "' still runs after waiting ",
                       absl::ToInt64Milliseconds(timeout),
                       " ms; it stays pending: wait again, or abort the communicator"));
    }
    return dist::UnsharedCopy(status_);  // this thread may outlive the worker's copy
  }

  bool Done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }

  bool Test(absl::Status* status) {
    {
      absl::MutexLock lock(&mu_);
      if (done_) {
        *status = dist::UnsharedCopy(status_);
        return true;
      }
    }
    // Never runs it here (a zero wait bound), but starts a deferred one.
    if (gate_ != nullptr) gate_->TryRun(this, absl::ZeroDuration());
    absl::MutexLock lock(&mu_);
    if (done_) *status = dist::UnsharedCopy(status_);
    return done_;
  }

 private:
  const char* const what_;
  const std::string group_;
  const std::shared_ptr<InlineGate> gate_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_WORK_H_

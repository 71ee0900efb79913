// One issued operation's completion, shared by the worker (which completes
// it) and the caller's handle (which may be destroyed first).
#ifndef DIST_PLUGINS_BACKENDS_SHM_WORK_H_
#define DIST_PLUGINS_BACKENDS_SHM_WORK_H_

#include <atomic>
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
    absl::MutexLock lock(&mu_);  // for a waiter asleep on done_
    status_ = std::move(unshared);
    done_.store(true, std::memory_order_release);  // status_ is final from here on
  }

  // Complete for a work no other thread can see yet (its issue, before the
  // handle is returned): nobody can sleep on it, so no lock.
  void CompleteUnshared(absl::Status status) {
    status_ = std::move(status);
    done_.store(true, std::memory_order_release);
  }

  // The operation's status once done; DEADLINE_EXCEEDED while it still runs
  // after `timeout` (the work stays pending).
  absl::Status Wait(absl::Duration timeout) {
    // A blocking call: run the operation on this thread if the
    // communicator lets us (no thread hand-off), else wait for the worker.
    if (!Done()) {
      if (gate_ != nullptr) gate_->TryRun(this, timeout);
      // Done already (it ran here): no lock, no deadline, no clock read.
      if (!Done() && !AwaitDone(timeout)) {
        return absl::DeadlineExceededError(
            absl::StrCat("shm: ", what_, " on group '", group_, "' still runs after waiting ",
                         absl::ToInt64Milliseconds(timeout),
                         " ms; it stays pending: wait again, or abort the communicator"));
      }
    }
    return dist::UnsharedCopy(status_);  // this thread may outlive the worker's copy
  }

  // Lock-free: callers poll it (a caller moving send/recv, every turn).
  bool Done() const { return done_.load(std::memory_order_acquire); }

  bool Test(absl::Status* status) {
    // Never runs it here (a zero wait bound), but starts a deferred one.
    if (!Done() && gate_ != nullptr) gate_->TryRun(this, absl::ZeroDuration());
    if (!Done()) return false;
    *status = dist::UnsharedCopy(status_);
    return true;
  }

 private:
  const char* const what_;
  const std::string group_;
  const std::shared_ptr<InlineGate> gate_;
  bool AwaitDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(this, &Work::Done), timeout);
  }

  absl::Mutex mu_;  // only to sleep on: Complete signals under it
  // Written once, under mu_, before done_; read after done_ without it.
  absl::Status status_;
  std::atomic<bool> done_{false};
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_WORK_H_

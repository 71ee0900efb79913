// dist SDK, C++ side: the completion of one operation, shared by whoever
// finishes it (a worker, or a caller that ran it) and whoever waits for it
// (the work handle, which may be destroyed first). Header-only; Abseil only.
#ifndef DIST_CPP_COMPLETION_HPP_
#define DIST_CPP_COMPLETION_HPP_

#include <atomic>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"

namespace dist {

class Completion {
 public:
  // Runs once with the operation's status, on the thread that completes it
  // (or at once, on the caller's, when it is complete already). It must not
  // block: the next operation waits behind it.
  using Callback = absl::AnyInvocable<void(const absl::Status&) &&>;

  // Marks the operation done with `status`; only the first call counts
  // (returns whether this one did). Keeps a copy that shares nothing with
  // `status` (dist::UnsharedCopy: the completing thread may end several
  // operations with one error and release it last).
  bool Complete(const absl::Status& status) {
    std::vector<Callback> callbacks;
    {
      absl::MutexLock lock(&mu_);
      if (done_.load(std::memory_order_relaxed)) return false;
      status_ = UnsharedCopy(status);
      done_.store(true, std::memory_order_release);  // status_ is final from here on
      callbacks.swap(callbacks_);
    }
    for (Callback& callback : callbacks) std::move(callback)(status_);
    return true;
  }

  // Lock-free: pollers call it every turn.
  bool Done() const { return done_.load(std::memory_order_acquire); }

  // Sleeps until done, at most `timeout`; returns Done().
  bool WaitFor(absl::Duration timeout) const {
    if (Done()) return true;
    if (timeout <= absl::ZeroDuration()) return false;
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(this, &Completion::Done), timeout);
  }

  // The operation's status; only once Done(). A copy this thread owns.
  absl::Status status() const { return UnsharedCopy(status_); }

  void OnDone(Callback callback) {
    {
      absl::MutexLock lock(&mu_);
      if (!done_.load(std::memory_order_relaxed)) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    std::move(callback)(status_);
  }

 private:
  mutable absl::Mutex mu_;  // to sleep on, and for the callbacks
  std::vector<Callback> callbacks_ ABSL_GUARDED_BY(mu_);
  // Written once, under mu_, before done_; read after done_ without it.
  absl::Status status_;
  std::atomic<bool> done_{false};
};

}  // namespace dist

#endif  // DIST_CPP_COMPLETION_HPP_

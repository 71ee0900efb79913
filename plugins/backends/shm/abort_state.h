// A communicator's abort flag: set once by comm_abort (any thread), polled
// by the worker while it waits on peers.
#ifndef DIST_PLUGINS_BACKENDS_SHM_ABORT_STATE_H_
#define DIST_PLUGINS_BACKENDS_SHM_ABORT_STATE_H_

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace dist_shm {

class AbortState {
 public:
  // Returns false if already aborted (the first reason wins).
  bool Set(const std::string& reason) {
    absl::MutexLock lock(&mu_);
    if (aborted_.load(std::memory_order_relaxed)) return false;
    reason_ = reason;
    aborted_.store(true, std::memory_order_release);
    return true;
  }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  std::string reason() const {
    absl::MutexLock lock(&mu_);
    return reason_;
  }

 private:
  std::atomic<bool> aborted_{false};
  mutable absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_ABORT_STATE_H_

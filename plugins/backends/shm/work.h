// One issued operation's completion, shared by the worker (which completes
// it) and the caller's handle (which may be destroyed first).
#ifndef DIST_PLUGINS_BACKENDS_SHM_WORK_H_
#define DIST_PLUGINS_BACKENDS_SHM_WORK_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dist_shm {

class Work {
 public:
  Work(std::string what, std::string group) : what_(std::move(what)), group_(std::move(group)) {}

  void Complete(absl::Status status) {
    absl::MutexLock lock(&mu_);
    status_ = std::move(status);
    done_ = true;
  }

  // The operation's status once done; DEADLINE_EXCEEDED while it still runs
  // after `timeout` (the work stays pending).
  absl::Status Wait(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "shm: ", what_, " on group '", group_, "' still runs after waiting ",
          absl::ToInt64Milliseconds(timeout),
          " ms; it stays pending: wait again, or abort the communicator"));
    }
    return status_;
  }

  bool Test(absl::Status* status) {
    absl::MutexLock lock(&mu_);
    if (done_) *status = status_;
    return done_;
  }

 private:
  const std::string what_;
  const std::string group_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_WORK_H_

#include "plugins/backends/gloo/work.h"

#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"

namespace dist_gloo {

void Work::Complete(const absl::Status& status) {
  // A copy that shares nothing with `status` (see work.h).
  absl::Status unshared = dist::UnsharedCopy(status);
  absl::MutexLock lock(&mu_);
  if (done_) return;
  status_ = std::move(unshared);
  done_ = true;
}

bool Work::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

absl::Status Work::Wait(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("Gloo work still pending after waiting ", absl::FormatDuration(timeout),
                     "; wait longer or check that every rank issues the same operations"));
  }
  return dist::UnsharedCopy(status_);  // this thread may outlive the worker's copy
}

absl::Status Work::Test(bool* done) const {
  absl::MutexLock lock(&mu_);
  *done = done_;
  return done_ ? dist::UnsharedCopy(status_) : absl::OkStatus();
}

}  // namespace dist_gloo

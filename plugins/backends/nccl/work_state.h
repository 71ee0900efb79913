// One started operation: a CUDA event recorded on the operation's stream
// right after NCCL enqueued it, plus a result that a communicator abort can
// set first. Shared by the caller's work handle and the communicator's
// watchdog (which fails it on a timeout or an NCCL error).
#ifndef DIST_PLUGINS_BACKENDS_NCCL_WORK_STATE_H_
#define DIST_PLUGINS_BACKENDS_NCCL_WORK_STATE_H_

#include <cuda_runtime_api.h>

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dist::nccl {

class WorkState {
 public:
  // Takes ownership of `done`. `what` names the op and the rank, for errors.
  WorkState(std::string what, cudaEvent_t done, absl::Time deadline);
  ~WorkState();
  WorkState(const WorkState&) = delete;
  WorkState& operator=(const WorkState&) = delete;

  // nullopt while the operation runs; its result once it is done. The first
  // result sticks.
  std::optional<absl::Status> Poll();

  // Fails the operation with `status` unless it has already completed.
  void Fail(const absl::Status& status);

  cudaEvent_t event() const { return done_; }
  absl::Time deadline() const { return deadline_; }
  const std::string& what() const { return what_; }

 private:
  // Requires mu_. Reads the event once into result_ when it has fired.
  void QueryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string what_;
  const cudaEvent_t done_;
  const absl::Time deadline_;
  absl::Mutex mu_;
  std::optional<absl::Status> result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dist::nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_WORK_STATE_H_

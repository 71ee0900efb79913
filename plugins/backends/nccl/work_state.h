// One started operation: a CUDA event recorded on the operation's stream
// right after NCCL enqueued it, plus a result that a communicator abort can
// set first. Shared by the caller's work handle and the communicator's
// watchdog (which fails it on a timeout or an NCCL error).
//
// A fired event alone is not success: NCCL may report a failed peer
// asynchronously while its kernels still finish (with garbage), so the
// communicator's health is asked before success sticks, as PyTorch's
// ProcessGroupNCCL does.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_WORK_STATE_H_
#define DIST_PLUGINS_BACKENDS_NCCL_WORK_STATE_H_

#include <cuda_runtime_api.h>

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dist_nccl {

class WorkState {
 public:
  // Takes ownership of `done`. `what` names the op and the rank, for errors.
  WorkState(std::string what, cudaEvent_t done, absl::Time deadline);
  ~WorkState();
  WorkState(const WorkState&) = delete;
  WorkState& operator=(const WorkState&) = delete;

  // After the event fired: OK when the communicator reports no error, its
  // error otherwise, nullopt when that cannot be told yet. May abort the
  // communicator (and so Fail this work); it is called without mu_ held.
  using HealthCheck = absl::FunctionRef<std::optional<absl::Status>()>;

  // nullopt while the operation runs (or its health is not known yet); its
  // result once it is done. The first result sticks.
  std::optional<absl::Status> Poll(HealthCheck health);

  // Fails the operation with `status` unless a result is already set.
  void Fail(const absl::Status& status);
  // `cause` (e.g. the communicator's abort) as this operation's failure:
  // "<what> failed: <cause>".
  absl::Status Failed(const absl::Status& cause) const;

  cudaEvent_t event() const { return done_; }
  absl::Time deadline() const { return deadline_; }
  const std::string& what() const { return what_; }

 private:
  const std::string what_;
  const cudaEvent_t done_;
  const absl::Time deadline_;
  absl::Mutex mu_;
  std::optional<absl::Status> result_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_WORK_STATE_H_

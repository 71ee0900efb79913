#include "plugins/backends/nccl/work_state.h"

#include <utility>

#include "plugins/backends/nccl/cuda_status.h"

namespace dist::nccl {

WorkState::WorkState(std::string what, cudaEvent_t done, absl::Time deadline)
    : what_(std::move(what)), done_(done), deadline_(deadline) {}

WorkState::~WorkState() {
  // Safe while the event is still pending: CUDA frees it once it fires.
  if (done_ != nullptr) cudaEventDestroy(done_);
}

void WorkState::QueryLocked() {
  if (result_.has_value()) return;
  const cudaError_t state = cudaEventQuery(done_);
  if (state == cudaErrorNotReady) return;
  result_ = CudaStatus(state, what_);  // OK, or the kernel's CUDA error
}

std::optional<absl::Status> WorkState::Poll() {
  absl::MutexLock lock(&mu_);
  QueryLocked();
  return result_;
}

void WorkState::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  QueryLocked();  // finished before the failure: keep its result
  if (!result_.has_value()) result_ = status;
}

}  // namespace dist::nccl

#include "plugins/backends/nccl/work_state.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "plugins/backends/nccl/cuda_status.h"

namespace dist_nccl {

WorkState::WorkState(std::string what, cudaEvent_t done, absl::Time deadline)
    : what_(std::move(what)), done_(done), deadline_(deadline) {}

WorkState::~WorkState() {
  // Safe while the event is still pending: CUDA frees it once it fires.
  if (done_ != nullptr) cudaEventDestroy(done_);
}

std::optional<absl::Status> WorkState::Poll(HealthCheck health) {
  {
    absl::MutexLock lock(&mu_);
    if (result_.has_value()) return result_;
    const cudaError_t state = cudaEventQuery(done_);
    if (state == cudaErrorNotReady) return std::nullopt;
    if (state != cudaSuccess) {
      result_ = CudaStatus(state, what_);  // the kernel's CUDA error
      return result_;
    }
  }
  const std::optional<absl::Status> healthy = health();
  absl::MutexLock lock(&mu_);
  // An abort that the health check started (or that raced it) has already
  // failed this work with the reason: keep that.
  if (!result_.has_value() && healthy.has_value()) {
    result_ = healthy->ok() ? *healthy : Failed(*healthy);
  }
  return result_;
}

void WorkState::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (!result_.has_value()) result_ = status;
}

absl::Status WorkState::Failed(const absl::Status& cause) const {
  return absl::Status(cause.code(), absl::StrCat(what_, " failed: ", cause.message()));
}

}  // namespace dist_nccl

// Built when Bazel found no CUDA toolkit: CUDA buffers are refused clearly.
#include "tools/distbench/device_memory.h"

namespace distbench {
namespace internal {

namespace {
absl::Status NoCuda() {
  return absl::UnavailableError(
      "distbench was built without CUDA (no CUDA toolkit at build time); use --device=cpu or "
      "rebuild with CUDA_HOME set");
}
}  // namespace

absl::StatusOr<void*> CudaAllocate(int, size_t) { return NoCuda(); }
void CudaFree(void*) {}
absl::Status CudaCopy(void*, const void*, size_t, bool) { return NoCuda(); }
absl::Status CudaSynchronize(int) { return NoCuda(); }

}  // namespace internal
}  // namespace distbench

// CUDA buffers for --device=cuda (NCCL and CUDA-aware backends).
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"
#include "tools/distbench/device_memory.h"

namespace distbench {
namespace internal {

namespace {
absl::Status CudaError(cudaError_t error, const char* what) {
  return absl::UnavailableError(absl::StrCat(what, " failed: ", cudaGetErrorString(error),
                                             "; check the GPU with nvidia-smi"));
}
}  // namespace

absl::StatusOr<void*> CudaAllocate(int index, size_t bytes) {
  cudaError_t error = cudaSetDevice(index);
  if (error != cudaSuccess)
    return CudaError(error, absl::StrCat("cudaSetDevice(", index, ")").c_str());
  void* data = nullptr;
  error = cudaMalloc(&data, bytes);
  if (error != cudaSuccess) return CudaError(error, "cudaMalloc");
  return data;
}

void CudaFree(void* data) { cudaFree(data); }

absl::Status CudaCopy(void* dst, const void* src, size_t bytes, bool to_device) {
  cudaError_t error =
      cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  if (error != cudaSuccess) return CudaError(error, "cudaMemcpy");
  return absl::OkStatus();
}

absl::Status CudaSynchronize(int index) {
  cudaError_t error = cudaSetDevice(index);
  if (error == cudaSuccess) error = cudaDeviceSynchronize();
  if (error != cudaSuccess) return CudaError(error, "cudaDeviceSynchronize");
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace distbench

// dist: GradientReducer buckets in CUDA device memory, for GPU backends
// such as nccl. Header-only; needs the CUDA runtime (cuda_runtime_api.h,
// -lcudart).
//
//   dist::GradientReducer::Options options;
//   options.memory = std::make_shared<dist::CudaBucketMemory>(device, stream);
//   dist::GradientReducer reducer(group, options);  // gradients on cuda:device
//
// Copies into and out of buckets are queued on `stream` (NULL: the legacy
// default stream) and do not block the host; each bucket's all-reduce is
// ordered after them on the same stream. Pass the stream your backward pass
// runs on, so a gradient is copied only after the kernel that made it.
// After Finish() the averaged gradients are written back on that stream:
// work queued on it afterwards sees them.
#ifndef DIST_CUDA_BUCKET_MEMORY_HPP_
#define DIST_CUDA_BUCKET_MEMORY_HPP_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dist/bucket_memory.hpp"
#include "dist/types.h"

namespace dist {

class CudaBucketMemory : public BucketMemory {
 public:
  explicit CudaBucketMemory(int device, cudaStream_t stream = nullptr)
      : device_(device), stream_(stream) {}

  dist_device_t device() const override { return dist_cuda(device_); }
  void* stream() const override { return stream_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaError_t error = previous == device_ ? cudaSuccess : cudaSetDevice(device_);
    void* data = nullptr;
    if (error == cudaSuccess) error = cudaMalloc(&data, bytes);
    if (previous >= 0 && previous != device_) cudaSetDevice(previous);
    if (error != cudaSuccess) return Failed("cudaMalloc", error, bytes);
    return data;
  }
  void Free(void* data) override { cudaFree(data); }
  absl::Status Copy(void* to, const void* from, size_t bytes) override {
    const cudaError_t error = cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_);
    return error == cudaSuccess ? absl::OkStatus() : Failed("cudaMemcpyAsync", error, bytes);
  }
  absl::Status Zero(void* data, size_t bytes) override {
    const cudaError_t error = cudaMemsetAsync(data, 0, bytes, stream_);
    return error == cudaSuccess ? absl::OkStatus() : Failed("cudaMemsetAsync", error, bytes);
  }

 private:
  absl::Status Failed(const char* call, cudaError_t error, size_t bytes) const {
    return absl::InternalError(absl::StrCat("GradientReducer on cuda:", device_, ": ", call, " of ",
                                            bytes, " bytes failed: ", cudaGetErrorName(error), ": ",
                                            cudaGetErrorString(error)));
  }

  const int device_;
  const cudaStream_t stream_;
};

}  // namespace dist

#endif  // DIST_CUDA_BUCKET_MEMORY_HPP_

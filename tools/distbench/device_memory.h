// Buffers on the benchmarked device: host memory for the CPU, device memory
// for CUDA (only when built with CUDA; otherwise a clear error).
#ifndef DIST_TOOLS_DISTBENCH_DEVICE_MEMORY_H_
#define DIST_TOOLS_DISTBENCH_DEVICE_MEMORY_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "dist/types.h"

namespace distbench {

// One allocation; freed on destruction.
class DeviceBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(dist_device_t device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  dist_device_t device() const { return device_; }

  absl::Status CopyFromHost(const std::vector<char>& host);
  absl::StatusOr<std::vector<char>> CopyToHost() const;

 private:
  DeviceBuffer(dist_device_t device, void* data, size_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}

  dist_device_t device_;
  void* data_;
  size_t bytes_;
};

// Waits until the device has finished all work (CUDA: cudaDeviceSynchronize).
absl::Status SynchronizeDevice(dist_device_t device);

// CUDA hooks, in device_memory_cuda.cc or device_memory_nocuda.cc.
namespace internal {
absl::StatusOr<void*> CudaAllocate(int index, size_t bytes);
void CudaFree(void* data);
absl::Status CudaCopy(void* dst, const void* src, size_t bytes, bool to_device);
absl::Status CudaSynchronize(int index);
}  // namespace internal

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_DEVICE_MEMORY_H_

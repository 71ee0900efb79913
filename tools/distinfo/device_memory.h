// Buffers for the self-test on the device a backend works on: host memory
// for CPU backends, CUDA memory (through libcudart, opened at run time so
// distinfo runs on machines without CUDA) for CUDA-only backends.
#ifndef DIST_TOOLS_DISTINFO_DEVICE_MEMORY_H_
#define DIST_TOOLS_DISTINFO_DEVICE_MEMORY_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "dist/types.h"

namespace dist::distinfo {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Makes `device` current and returns memory for it.
  static absl::StatusOr<std::unique_ptr<DeviceMemory>> For(dist_device_t device);

  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual absl::Status CopyIn(void* device, const void* host, size_t bytes) = 0;
  // Waits for the device to finish earlier work, then copies.
  virtual absl::Status CopyOut(void* host, const void* device, size_t bytes) = 0;
};

// Number of CUDA devices, or an error saying why there are none.
absl::StatusOr<int> CudaDeviceCount();

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_DEVICE_MEMORY_H_

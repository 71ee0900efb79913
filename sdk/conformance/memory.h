// dist conformance kit: buffers on the device under test, with a host
// mirror the checks fill and read. CPU buffers are plain memory; CUDA
// buffers use the CUDA runtime, loaded with dlopen only when a backend
// declares CUDA (so the kit itself never links CUDA).
#ifndef DIST_SDK_CONFORMANCE_MEMORY_H_
#define DIST_SDK_CONFORMANCE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/types.h"

namespace dist::conformance {

class DeviceBuffer {
 public:
  virtual ~DeviceBuffer() = default;
  // Device address of byte `offset`; NULL for an empty buffer.
  virtual void* data(size_t offset = 0) = 0;
  // The host mirror: fill it, Upload; Download, then read it.
  std::vector<unsigned char>& host() { return host_; }
  virtual absl::Status Upload() = 0;
  virtual absl::Status Download() = 0;

 protected:
  std::vector<unsigned char> host_;
};

// Allocates `bytes` on `device`. A CUDA device without a usable runtime is
// UNAVAILABLE with the reason.
absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(dist_device_t device, size_t bytes);

// Number of CUDA devices (0 with the reason when none can be used).
absl::StatusOr<int> CudaDeviceCount();

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_MEMORY_H_

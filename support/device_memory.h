// Buffers on the device a backend works on, for the tools (distbench,
// distinfo's self-test) and the SDK conformance kit: page-aligned host
// memory for DIST_DEVICE_CPU, CUDA memory through the CUDA runtime loaded at
// run time (dist/cpp/cuda_runtime_loader.hpp) for DIST_DEVICE_CUDA. Nothing
// here links CUDA: built anywhere, on a machine without a usable runtime or
// device a CUDA buffer is UNAVAILABLE with the reason ("no CUDA device: ...").
// When a CUDA plugin (or distbench's NCCL baseline) already brought
// libcudart into the process, that same runtime is used, so the buffers live
// in the backend's CUDA context; the nccl plugin's CPU emulation
// (tests/nccl/emulation) stands in for it the same way.
#ifndef DIST_SUPPORT_DEVICE_MEMORY_H_
#define DIST_SUPPORT_DEVICE_MEMORY_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/types.h"

namespace dist {

// One allocation on one device; freed on destruction.
class DeviceBuffer {
 public:
  // `bytes` on `device` (CUDA: made the current device first). The storage
  // is never empty (64 bytes at least), so data() is never NULL: a backend
  // may reject NULL data even for a count of 0.
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(dist_device_t device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Device address of byte `offset`.
  void* data(size_t offset = 0) const { return static_cast<char*>(data_) + offset; }
  size_t bytes() const { return bytes_; }
  dist_device_t device() const { return device_; }

  // Copies min(bytes, bytes()) bytes from `host` to the start of the buffer.
  absl::Status CopyIn(const void* host, size_t bytes);
  // Waits for all work on the device (a backend may have finished only on
  // its own stream), then copies min(bytes, bytes()) bytes to `host`.
  absl::Status CopyOut(void* host, size_t bytes) const;

  // A host mirror of bytes() bytes for checks: fill host(), Upload();
  // Download(), then read host().
  std::vector<unsigned char>& host();
  absl::Status Upload() { return CopyIn(host().data(), host().size()); }
  absl::Status Download() { return CopyOut(host().data(), host().size()); }

 private:
  DeviceBuffer(dist_device_t device, void* data, size_t bytes)
      : device_(device), data_(data), bytes_(bytes) {}

  dist_device_t device_;
  void* data_;
  size_t bytes_;
  std::vector<unsigned char> host_;  // sized on first use of host()
};

// Waits until `device` has finished all work (CUDA: cudaDeviceSynchronize);
// nothing to wait for on the CPU.
absl::Status SynchronizeDevice(dist_device_t device);

// Number of CUDA devices (0 when the runtime reports none), or UNAVAILABLE
// with the reason when no CUDA runtime can be used.
absl::StatusOr<int> CudaDeviceCount();

}  // namespace dist

#endif  // DIST_SUPPORT_DEVICE_MEMORY_H_

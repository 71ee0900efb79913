#include "tools/distbench/device_memory.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace distbench {

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Allocate(dist_device_t device,
                                                                     size_t bytes) {
  // Never zero bytes: backends may reject a NULL data pointer.
  const size_t size = bytes == 0 ? 64 : bytes;
  void* data = nullptr;
  if (device.type == DIST_DEVICE_CPU) {
    // Page alignment, like the buffers of real programs and of nccl-tests.
    if (posix_memalign(&data, 4096, size) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " bytes of host memory; lower -e"));
    }
  } else {
    absl::StatusOr<void*> cuda = internal::CudaAllocate(device.index, size);
    if (!cuda.ok()) return cuda.status();
    data = *cuda;
  }
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(device, data, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (device_.type == DIST_DEVICE_CPU) {
    free(data_);
  } else {
    internal::CudaFree(data_);
  }
}

absl::Status DeviceBuffer::CopyFromHost(const std::vector<char>& host) {
  const size_t size = host.size() < bytes_ ? host.size() : bytes_;
  if (device_.type == DIST_DEVICE_CPU) {
    if (size > 0) std::memcpy(data_, host.data(), size);
    return absl::OkStatus();
  }
  return internal::CudaCopy(data_, host.data(), size, /*to_device=*/true);
}

absl::StatusOr<std::vector<char>> DeviceBuffer::CopyToHost() const {
  std::vector<char> host(bytes_);
  if (device_.type == DIST_DEVICE_CPU) {
    if (bytes_ > 0) std::memcpy(host.data(), data_, bytes_);
    return host;
  }
  absl::Status status = internal::CudaCopy(host.data(), data_, bytes_, /*to_device=*/false);
  if (!status.ok()) return status;
  return host;
}

absl::Status SynchronizeDevice(dist_device_t device) {
  if (device.type == DIST_DEVICE_CPU) return absl::OkStatus();
  return internal::CudaSynchronize(device.index);
}

}  // namespace distbench

#include "support/device_memory.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dist/cpp/cuda_runtime_loader.hpp"

namespace dist {
namespace {

using CudaRuntime = CudaRuntimeLoader;

absl::Status CudaError(const CudaRuntime& rt, int code, const char* what) {
  return absl::UnavailableError(rt.Error(what, code));
}

// The runtime, or why there is none.
absl::StatusOr<const CudaRuntime*> Runtime() {
  const CudaRuntime& rt = CudaRuntime::Get();
  if (!rt.load_error().empty()) return absl::UnavailableError(rt.load_error());
  return &rt;
}

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  absl::StatusOr<const CudaRuntime*> rt = Runtime();
  if (!rt.ok()) return rt.status();
  int count = 0;
  if (int rc = (*rt)->get_device_count(&count); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: ", (*rt)->Error("cudaGetDeviceCount", rc)));
  }
  return count;
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::Allocate(dist_device_t device,
                                                                     size_t bytes) {
  const size_t size = bytes < 64 ? 64 : bytes;
  void* data = nullptr;
  if (device.type == DIST_DEVICE_CPU) {
    // Page alignment, like the buffers of real programs and of nccl-tests.
    if (posix_memalign(&data, 4096, size) != 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", size, " bytes of host memory"));
    }
    return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(device, data, bytes));
  }
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) return count.status();
  if (*count == 0) return absl::UnavailableError("no CUDA device");
  const CudaRuntime& rt = CudaRuntime::Get();
  if (int rc = rt.set_device(device.index); rc != 0) {
    return CudaError(rt, rc, absl::StrCat("cudaSetDevice(", device.index, ")").c_str());
  }
  if (int rc = rt.malloc(&data, size); rc != 0) {
    return absl::ResourceExhaustedError(rt.Error("cudaMalloc", rc));
  }
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(device, data, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (device_.type == DIST_DEVICE_CPU) {
    free(data_);
  } else {
    CudaRuntime::Get().free(data_);
  }
}

std::vector<unsigned char>& DeviceBuffer::host() {
  if (host_.size() != bytes_) host_.resize(bytes_);
  return host_;
}

absl::Status DeviceBuffer::CopyIn(const void* host, size_t bytes) {
  const size_t size = bytes < bytes_ ? bytes : bytes_;
  if (size == 0) return absl::OkStatus();
  if (device_.type == DIST_DEVICE_CPU) {
    std::memcpy(data_, host, size);
    return absl::OkStatus();
  }
  const CudaRuntime& rt = CudaRuntime::Get();
  if (int rc = rt.memcpy(data_, host, size, CudaRuntime::kHostToDevice); rc != 0) {
    return CudaError(rt, rc, "cudaMemcpy");
  }
  return absl::OkStatus();
}

absl::Status DeviceBuffer::CopyOut(void* host, size_t bytes) const {
  const size_t size = bytes < bytes_ ? bytes : bytes_;
  if (device_.type == DIST_DEVICE_CPU) {
    if (size > 0) std::memcpy(host, data_, size);
    return absl::OkStatus();
  }
  absl::Status synchronized = SynchronizeDevice(device_);
  if (!synchronized.ok() || size == 0) return synchronized;
  const CudaRuntime& rt = CudaRuntime::Get();
  if (int rc = rt.memcpy(host, data_, size, CudaRuntime::kDeviceToHost); rc != 0) {
    return CudaError(rt, rc, "cudaMemcpy");
  }
  return absl::OkStatus();
}

absl::Status SynchronizeDevice(dist_device_t device) {
  if (device.type == DIST_DEVICE_CPU) return absl::OkStatus();
  absl::StatusOr<const CudaRuntime*> rt = Runtime();
  if (!rt.ok()) return rt.status();
  int rc = (*rt)->set_device(device.index);
  if (rc == 0) rc = (*rt)->synchronize();
  if (rc != 0) return CudaError(**rt, rc, "cudaDeviceSynchronize");
  return absl::OkStatus();
}

}  // namespace dist

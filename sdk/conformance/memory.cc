#include "sdk/conformance/memory.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "dist/cpp/cuda_runtime_loader.hpp"

namespace dist::conformance {
namespace {

class HostBuffer : public DeviceBuffer {
 public:
  explicit HostBuffer(size_t bytes) { host_.resize(bytes); }
  void* data(size_t offset) override { return host_.empty() ? nullptr : host_.data() + offset; }
  absl::Status Upload() override { return absl::OkStatus(); }
  absl::Status Download() override { return absl::OkStatus(); }
};

using CudaRuntime = CudaRuntimeLoader;
constexpr int kHostToDevice = CudaRuntimeLoader::kHostToDevice;
constexpr int kDeviceToHost = CudaRuntimeLoader::kDeviceToHost;

absl::Status Check(const CudaRuntime& rt, int code, const char* what) {
  if (code == 0) return absl::OkStatus();
  return absl::InternalError(rt.Error(what, code));
}

class CudaBuffer : public DeviceBuffer {
 public:
  CudaBuffer(const CudaRuntime& rt, void* device, size_t bytes) : rt_(rt), device_(device) {
    host_.resize(bytes);
  }
  ~CudaBuffer() override {
    if (device_ != nullptr) rt_.free(device_);
  }
  void* data(size_t offset) override {
    return device_ == nullptr ? nullptr : static_cast<char*>(device_) + offset;
  }
  absl::Status Upload() override {
    if (host_.empty()) return absl::OkStatus();
    return Check(rt_, rt_.memcpy(device_, host_.data(), host_.size(), kHostToDevice), "cudaMemcpy");
  }
  absl::Status Download() override {
    if (host_.empty()) return absl::OkStatus();
    // The backend may have finished on its stream only; wait for the device.
    absl::Status status = Check(rt_, rt_.synchronize(), "cudaDeviceSynchronize");
    if (!status.ok()) return status;
    return Check(rt_, rt_.memcpy(host_.data(), device_, host_.size(), kDeviceToHost), "cudaMemcpy");
  }

 private:
  const CudaRuntime& rt_;
  void* device_;
};

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  const CudaRuntime& rt = CudaRuntime::Get();
  if (!rt.load_error().empty()) return absl::UnavailableError(rt.load_error());
  int count = 0;
  const int code = rt.get_device_count(&count);
  if (code != 0) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: ", rt.Error("cudaGetDeviceCount", code)));
  }
  if (count == 0) return absl::UnavailableError("no CUDA device");
  return count;
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(dist_device_t device, size_t bytes) {
  if (device.type == DIST_DEVICE_CPU) {
    return std::unique_ptr<DeviceBuffer>(new HostBuffer(bytes));
  }
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) return count.status();
  const CudaRuntime& rt = CudaRuntime::Get();
  absl::Status status = Check(rt, rt.set_device(device.index), "cudaSetDevice");
  if (!status.ok()) return status;
  void* memory = nullptr;
  if (bytes > 0) {
    status = Check(rt, rt.malloc(&memory, bytes), "cudaMalloc");
    if (!status.ok()) return status;
  }
  return std::unique_ptr<DeviceBuffer>(new CudaBuffer(rt, memory, bytes));
}

}  // namespace dist::conformance

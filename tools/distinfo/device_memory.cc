#include "tools/distinfo/device_memory.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/cuda_runtime_loader.hpp"

namespace dist::distinfo {
namespace {

using CudaRuntime = CudaRuntimeLoader;
constexpr int kHostToDevice = CudaRuntimeLoader::kHostToDevice;
constexpr int kDeviceToHost = CudaRuntimeLoader::kDeviceToHost;

class HostMemory : public DeviceMemory {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    blocks_.emplace_back(bytes);
    return blocks_.back().data();
  }
  absl::Status CopyIn(void* device, const void* host, size_t bytes) override {
    std::memcpy(device, host, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyOut(void* host, const void* device, size_t bytes) override {
    std::memcpy(host, device, bytes);
    return absl::OkStatus();
  }

 private:
  std::vector<std::vector<char>> blocks_;
};

class CudaMemory : public DeviceMemory {
 public:
  ~CudaMemory() override {
    for (void* p : blocks_) CudaRuntime::Get().free(p);
  }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = nullptr;
    if (int rc = CudaRuntime::Get().malloc(&p, bytes); rc != 0) {
      return absl::ResourceExhaustedError(CudaRuntime::Get().Error("cudaMalloc", rc));
    }
    blocks_.push_back(p);
    return p;
  }
  absl::Status CopyIn(void* device, const void* host, size_t bytes) override {
    const CudaRuntime& rt = CudaRuntime::Get();
    if (int rc = rt.memcpy(device, host, bytes, kHostToDevice); rc != 0) {
      return absl::InternalError(rt.Error("cudaMemcpy", rc));
    }
    return absl::OkStatus();
  }
  absl::Status CopyOut(void* host, const void* device, size_t bytes) override {
    const CudaRuntime& rt = CudaRuntime::Get();
    // The backend works on its own streams: wait for all of them.
    if (int rc = rt.synchronize(); rc != 0) {
      return absl::InternalError(rt.Error("cudaDeviceSynchronize", rc));
    }
    if (int rc = rt.memcpy(host, device, bytes, kDeviceToHost); rc != 0) {
      return absl::InternalError(rt.Error("cudaMemcpy", rc));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<void*> blocks_;
};

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  const CudaRuntime& rt = CudaRuntime::Get();
  if (!rt.load_error().empty()) return absl::UnavailableError(rt.load_error());
  int count = 0;
  if (int rc = rt.get_device_count(&count); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA device: ", rt.Error("cudaGetDeviceCount", rc)));
  }
  return count;
}

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::For(dist_device_t device) {
  if (device.type == DIST_DEVICE_CPU) return std::make_unique<HostMemory>();
  const CudaRuntime& rt = CudaRuntime::Get();
  if (!rt.load_error().empty()) return absl::UnavailableError(rt.load_error());
  if (int rc = rt.set_device(device.index); rc != 0) {
    return absl::UnavailableError(rt.Error("cudaSetDevice", rc));
  }
  return std::make_unique<CudaMemory>();
}

}  // namespace dist::distinfo

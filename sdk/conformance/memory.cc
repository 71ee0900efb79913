#include "sdk/conformance/memory.h"

#include <dlfcn.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace dist::conformance {
namespace {

class HostBuffer : public DeviceBuffer {
 public:
  explicit HostBuffer(size_t bytes) { host_.resize(bytes); }
  void* data(size_t offset) override { return host_.empty() ? nullptr : host_.data() + offset; }
  absl::Status Upload() override { return absl::OkStatus(); }
  absl::Status Download() override { return absl::OkStatus(); }
};

// The few CUDA runtime entry points the kit needs, resolved at run time.
struct CudaRuntime {
  int (*get_device_count)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*synchronize)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string load_error;

  static const CudaRuntime& Get() {
    static const CudaRuntime runtime = Load();
    return runtime;
  }

  absl::Status Check(int code, const char* what) const {
    if (code == 0) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(what, " failed: ", error_string(code)));
  }

 private:
  static CudaRuntime Load() {
    CudaRuntime rt;
    void* handle = nullptr;
    // The runtime a CUDA plugin already brought in comes first, so the kit
    // and the plugin share one CUDA context; then the versioned names
    // (pip's CUDA wheels ship no unversioned libcudart.so), newest first.
    const char* const kNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                  "libcudart.so.11.0"};
    for (const char* name : kNames) {
      handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
      if (handle != nullptr) break;
    }
    for (const char* name : kNames) {
      if (handle != nullptr) break;
      handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    if (handle == nullptr) {
      rt.load_error = absl::StrCat("cannot load the CUDA runtime (libcudart.so): ", dlerror());
      return rt;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (fn == nullptr) rt.load_error = absl::StrCat("libcudart.so has no ", name);
    };
    sym(rt.get_device_count, "cudaGetDeviceCount");
    sym(rt.set_device, "cudaSetDevice");
    sym(rt.malloc, "cudaMalloc");
    sym(rt.free, "cudaFree");
    sym(rt.memcpy, "cudaMemcpy");
    sym(rt.synchronize, "cudaDeviceSynchronize");
    sym(rt.error_string, "cudaGetErrorString");
    return rt;
  }
};

constexpr int kHostToDevice = 1;
constexpr int kDeviceToHost = 2;

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
    return rt_.Check(rt_.memcpy(device_, host_.data(), host_.size(), kHostToDevice), "cudaMemcpy");
  }
  absl::Status Download() override {
    if (host_.empty()) return absl::OkStatus();
    // The backend may have finished on its stream only; wait for the device.
    absl::Status status = rt_.Check(rt_.synchronize(), "cudaDeviceSynchronize");
    if (!status.ok()) return status;
    return rt_.Check(rt_.memcpy(host_.data(), device_, host_.size(), kDeviceToHost), "cudaMemcpy");
  }

 private:
  const CudaRuntime& rt_;
  void* device_;
};

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  const CudaRuntime& rt = CudaRuntime::Get();
  if (!rt.load_error.empty()) return absl::UnavailableError(rt.load_error);
  int count = 0;
  const int code = rt.get_device_count(&count);
  if (code != 0) {
    return absl::UnavailableError(absl::StrCat("no CUDA device: ", rt.error_string(code)));
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
  absl::Status status = rt.Check(rt.set_device(device.index), "cudaSetDevice");
  if (!status.ok()) return status;
  void* memory = nullptr;
  if (bytes > 0) {
    status = rt.Check(rt.malloc(&memory, bytes), "cudaMalloc");
    if (!status.ok()) return status;
  }
  return std::unique_ptr<DeviceBuffer>(new CudaBuffer(rt, memory, bytes));
}

}  // namespace dist::conformance

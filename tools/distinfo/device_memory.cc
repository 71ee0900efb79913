#include "tools/distinfo/device_memory.h"

#include <dlfcn.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dist::distinfo {
namespace {

// The few CUDA runtime entry points the self-test needs; their C signatures
// have been stable since CUDA 4. Error codes are plain ints here.
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
    static const CudaRuntime* runtime = new CudaRuntime(Load());
    return *runtime;
  }

  std::string Error(const char* call, int code) const {
    return absl::StrCat(call, " failed: ",
                        error_string ? error_string(code) : "", " (", code, ")");
  }

 private:
  static CudaRuntime Load() {
    CudaRuntime rt;
    void* handle = nullptr;
    for (const char* name : {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
                             "libcudart.so.11.0"}) {
      handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
    }
    if (handle == nullptr) {
      rt.load_error = absl::StrCat("cannot load the CUDA runtime (libcudart.so): ",
                                   dlerror());
      return rt;
    }
    auto get = [&](const char* symbol, auto& fn) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
      if (fn == nullptr && rt.load_error.empty()) {
        rt.load_error = absl::StrCat("libcudart.so lacks ", symbol);
      }
    };
    get("cudaGetDeviceCount", rt.get_device_count);
    get("cudaSetDevice", rt.set_device);
    get("cudaMalloc", rt.malloc);
    get("cudaFree", rt.free);
    get("cudaMemcpy", rt.memcpy);
    get("cudaDeviceSynchronize", rt.synchronize);
    get("cudaGetErrorString", rt.error_string);
    return rt;
  }
};

constexpr int kHostToDevice = 1;
constexpr int kDeviceToHost = 2;

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
  if (!rt.load_error.empty()) return absl::UnavailableError(rt.load_error);
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
  if (!rt.load_error.empty()) return absl::UnavailableError(rt.load_error);
  if (int rc = rt.set_device(device.index); rc != 0) {
    return absl::UnavailableError(rt.Error("cudaSetDevice", rc));
  }
  return std::make_unique<CudaMemory>();
}

}  // namespace dist::distinfo

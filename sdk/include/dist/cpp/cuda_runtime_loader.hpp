// dist SDK, C++ side: the few CUDA runtime entry points that host-side
// tools and kits need (device count, device choice, malloc, copies), found
// at run time with dlopen, so the tool builds without CUDA and, on a
// machine without it, says why instead of failing to start.
//
//   const dist::CudaRuntimeLoader& cuda = dist::CudaRuntimeLoader::Get();
//   if (!cuda.load_error().empty()) ...;   // no libcudart here
//   int n = 0;
//   if (int rc = cuda.get_device_count(&n); rc != 0) ... cuda.Error("cudaGetDeviceCount", rc);
//
// Error codes are plain ints (cudaError_t values); their C signatures have
// been stable since CUDA 4.
#ifndef DIST_CPP_CUDA_RUNTIME_LOADER_HPP_
#define DIST_CPP_CUDA_RUNTIME_LOADER_HPP_

#include <dlfcn.h>

#include <cstddef>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace dist {

class CudaRuntimeLoader {
 public:
  static constexpr int kHostToDevice = 1;  // cudaMemcpyKind
  static constexpr int kDeviceToHost = 2;

  // Loaded once per process; never unloaded.
  static const CudaRuntimeLoader& Get() {
    static const CudaRuntimeLoader* const runtime = new CudaRuntimeLoader();
    return *runtime;
  }

  // "" when every entry point below was found.
  const std::string& load_error() const { return load_error_; }

  // "<call> failed: <cudaGetErrorString> (<code>)".
  std::string Error(const char* call, int code) const {
    return absl::StrCat(call, " failed: ", error_string != nullptr ? error_string(code) : "", " (",
                        code, ")");
  }

  int (*get_device_count)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*synchronize)() = nullptr;
  const char* (*error_string)(int) = nullptr;

 private:
  CudaRuntimeLoader() {
    // The runtime a CUDA plugin already brought into the process comes
    // first, so the tool and the plugin share one CUDA context; then the
    // versioned names (pip's CUDA wheels ship no unversioned libcudart.so),
    // newest first.
    const char* const kNames[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so",
                                  "libcudart.so.11.0"};
    void* handle = nullptr;
    for (const char* name : kNames) {
      if (handle == nullptr) handle = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    }
    for (const char* name : kNames) {
      if (handle == nullptr) handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    if (handle == nullptr) {
      load_error_ =
          absl::StrCat("cannot load the CUDA runtime (libcudart.so.13, .12 or .so): ", dlerror());
      return;
    }
    Resolve(handle, "cudaGetDeviceCount", get_device_count);
    Resolve(handle, "cudaSetDevice", set_device);
    Resolve(handle, "cudaMalloc", malloc);
    Resolve(handle, "cudaFree", free);
    Resolve(handle, "cudaMemcpy", memcpy);
    Resolve(handle, "cudaDeviceSynchronize", synchronize);
    Resolve(handle, "cudaGetErrorString", error_string);
  }

  template <typename Fn>
  void Resolve(void* handle, const char* symbol, Fn& fn) {
    fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
    if (fn == nullptr && load_error_.empty()) {
      load_error_ = absl::StrCat("the CUDA runtime lacks ", symbol);
    }
  }

  std::string load_error_;
};

}  // namespace dist

#endif  // DIST_CPP_CUDA_RUNTIME_LOADER_HPP_

// Makes `device` current for a scope and restores the caller's device
// after, so calling into the plugin never changes the caller's CUDA device.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_DEVICE_GUARD_H_
#define DIST_PLUGINS_BACKENDS_NCCL_DEVICE_GUARD_H_

#include <cuda_runtime_api.h>

namespace dist_nccl {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    result_ = previous_ == device ? cudaSuccess : cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && result_ == cudaSuccess) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  // cudaSuccess when the device could be made current.
  cudaError_t result() const { return result_; }

 private:
  int previous_ = -1;
  cudaError_t result_ = cudaSuccess;
};

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_DEVICE_GUARD_H_

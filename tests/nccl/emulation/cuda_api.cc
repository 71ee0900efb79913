// The CUDA runtime functions that the nccl plugin, its tests and its
// benchmark call, emulated on the CPU (see device_runtime.h). Exported
// under the version node of the real libcudart.so.13 (exports.lds), so the
// unchanged binaries bind to them.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "tests/nccl/emulation/device_runtime.h"
#include "tests/nccl/emulation/stream_handle.h"

struct CUstream_st {
  std::shared_ptr<dist::emulation::Stream> impl;
};

struct CUevent_st {
  std::shared_ptr<dist::emulation::Stream> stream;  // null: never recorded
  uint64_t ticket = 0;
};

namespace dist::emulation {

std::shared_ptr<Stream> ResolveStream(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return LegacyStream(CurrentDevice());
  }
  return stream->impl;
}

namespace {

// Asynchronous copies and fills take a while on a GPU; here they would be
// done almost at once, hiding a missing stream order. So they wait first
// (DIST_CUDA_EMULATION_ASYNC_DELAY_US, default 2000 us).
void AsyncDelay() {
  static const int delay_us = [] {
    const char* text = std::getenv("DIST_CUDA_EMULATION_ASYNC_DELAY_US");
    return text != nullptr && *text != '\0' ? std::atoi(text) : 2000;
  }();
  if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
}

cudaError_t CheckDevice(int device) {
  if (DeviceCount() == 0) return cudaErrorNoDevice;
  return device >= 0 && device < DeviceCount() ? cudaSuccess : cudaErrorInvalidDevice;
}

}  // namespace
}  // namespace dist::emulation

using dist::emulation::CurrentDevice;
using dist::emulation::DeviceCount;
using dist::emulation::EnqueueOrdered;
using dist::emulation::LegacyStream;
using dist::emulation::ResolveStream;
using dist::emulation::Stream;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = DeviceCount();
  return *count == 0 ? cudaErrorNoDevice : cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  const cudaError_t error = dist::emulation::CheckDevice(device);
  if (error == cudaSuccess) CurrentDevice() = device;
  return error;
}

cudaError_t cudaGetDevice(int* device) {
  if (DeviceCount() == 0) return cudaErrorNoDevice;
  *device = CurrentDevice();
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int length, int device) {
  const cudaError_t error = dist::emulation::CheckDevice(device);
  if (error != cudaSuccess) return error;
  std::snprintf(bus_id, static_cast<size_t>(length), "0000:%02X:00.0", 0x10 + device);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  const cudaError_t error = dist::emulation::CheckDevice(device);
  if (error != cudaSuccess) return error;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof(prop->name), "dist CPU emulation of a CUDA device");
  prop->totalGlobalMem = size_t{16} << 30;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->pciBusID = 0x10 + device;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidDevicePointer:
      return "cudaErrorInvalidDevicePointer";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidDevicePointer:
      return "invalid device pointer";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (CPU emulation with 0 devices)";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    default:
      return "unknown error";
  }
}

cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  if (pointer == nullptr) return cudaErrorInvalidValue;
  if (DeviceCount() == 0) return cudaErrorNoDevice;
  *pointer = dist::emulation::Allocate(bytes, CurrentDevice());
  return *pointer != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void* pointer) {
  if (pointer == nullptr) return cudaSuccess;
  const int device = dist::emulation::DeviceOf(pointer, 0);
  if (device < 0) return cudaErrorInvalidDevicePointer;
  // cudaFree synchronizes the device: queued work may still use the memory.
  dist::emulation::SynchronizeDevice(device);
  return dist::emulation::Free(pointer) ? cudaSuccess : cudaErrorInvalidDevicePointer;
}

cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  if (dist::emulation::DeviceOf(pointer, bytes) < 0) return cudaErrorInvalidValue;
  // Asynchronous on the legacy stream, as on a GPU.
  EnqueueOrdered(LegacyStream(CurrentDevice()), [=] {
    dist::emulation::AsyncDelay();
    std::memset(pointer, value, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* pointer, int value, size_t bytes, cudaStream_t stream) {
  if (dist::emulation::DeviceOf(pointer, bytes) < 0) return cudaErrorInvalidValue;
  EnqueueOrdered(ResolveStream(stream), [=] {
    dist::emulation::AsyncDelay();
    std::memset(pointer, value, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  if (dst == nullptr || src == nullptr) return bytes == 0 ? cudaSuccess : cudaErrorInvalidValue;
  EnqueueOrdered(ResolveStream(stream), [=] {
    dist::emulation::AsyncDelay();
    std::memmove(dst, src, bytes);
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (dst == nullptr || src == nullptr) return bytes == 0 ? cudaSuccess : cudaErrorInvalidValue;
  // Synchronous: no delay (the caller waits anyway).
  std::shared_ptr<Stream> legacy = LegacyStream(CurrentDevice());
  legacy->WaitFor(EnqueueOrdered(legacy, [=] { std::memmove(dst, src, bytes); }));
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
  if (DeviceCount() == 0) return cudaErrorNoDevice;
  dist::emulation::SynchronizeDevice(CurrentDevice());
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr) return cudaErrorInvalidValue;
  if (DeviceCount() == 0) return cudaErrorNoDevice;
  auto impl = std::make_shared<Stream>(CurrentDevice(), (flags & cudaStreamNonBlocking) == 0,
                                       /*legacy=*/false);
  dist::emulation::RegisterStream(impl);
  *stream = new CUstream_st{impl};
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    return cudaErrorInvalidResourceHandle;
  }
  stream->impl->Close();  // queued work still runs, as in CUDA
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::shared_ptr<Stream> impl = ResolveStream(stream);
  impl->WaitFor(impl->Tail());
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  if (fn == nullptr) return cudaErrorInvalidValue;
  EnqueueOrdered(ResolveStream(stream), [=] { fn(data); });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  if (event == nullptr) return cudaErrorInvalidValue;
  *event = new CUevent_st();
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<Stream> impl = ResolveStream(stream);
  // Recording is itself stream work, so it also waits as the stream's
  // other work would (legacy-stream ordering).
  event->ticket = EnqueueOrdered(impl, [] {});
  event->stream = impl;
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  if (event->stream == nullptr) return cudaSuccess;
  return event->stream->Done(event->ticket) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  if (event->stream != nullptr) event->stream->WaitFor(event->ticket);
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  std::shared_ptr<Stream> waited = event->stream;  // as recorded now
  const uint64_t ticket = event->ticket;
  EnqueueOrdered(ResolveStream(stream), [waited, ticket] {
    if (waited != nullptr) waited->WaitFor(ticket);
  });
  return cudaSuccess;
}

}  // extern "C"

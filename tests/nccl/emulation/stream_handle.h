// cudaStream_t -> the emulated stream behind it (cuda_api.cc), for the
// emulated NCCL, which runs its work on the caller's streams.
#ifndef DIST_TESTS_NCCL_EMULATION_STREAM_HANDLE_H_
#define DIST_TESTS_NCCL_EMULATION_STREAM_HANDLE_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "tests/nccl/emulation/device_runtime.h"

namespace dist::emulation {

// NULL, cudaStreamLegacy and cudaStreamPerThread are the legacy stream of
// the calling thread's current device.
std::shared_ptr<Stream> ResolveStream(cudaStream_t stream);

}  // namespace dist::emulation

#endif  // DIST_TESTS_NCCL_EMULATION_STREAM_HANDLE_H_

// Every CUDA and NCCL failure becomes one absl::Status line that says what
// was being done, the library's own words for what went wrong, and (where
// there is one) the fix.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_CUDA_STATUS_H_
#define DIST_PLUGINS_BACKENDS_NCCL_CUDA_STATUS_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dist_nccl {

// OK for cudaSuccess; otherwise "<what>: CUDA error <name>: <text>".
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

// OK for ncclSuccess; otherwise "<what>: NCCL error '<text>': <last error>".
// `comm` may be NULL; it only selects ncclGetLastError's context. Never
// called with ncclInProgress (that is not an error; see PollNccl).
absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view what);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_CUDA_STATUS_H_

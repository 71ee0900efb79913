#include "plugins/backends/nccl/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace dist_nccl {
namespace {

absl::StatusCode CudaCode(cudaError_t error) {
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusCode NcclCode(ncclResult_t result) {
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    case ncclSystemError:
    case ncclRemoteError:
      return absl::StatusCode::kUnavailable;  // a peer or the network failed
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::Status(CudaCode(error), absl::StrCat(what, ": CUDA error ", cudaGetErrorName(error),
                                                    ": ", cudaGetErrorString(error)));
}

absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view what) {
  if (result == ncclSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": NCCL error '", ncclGetErrorString(result), "'");
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&message, ": ", last);
  if (result == ncclRemoteError || result == ncclSystemError) {
    absl::StrAppend(&message, " (a peer rank or the network failed; NCCL_DEBUG=WARN shows more)");
  }
  return absl::Status(NcclCode(result), message);
}

}  // namespace dist_nccl

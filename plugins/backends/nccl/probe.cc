#include "plugins/backends/nccl/probe.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dist_nccl {

absl::StatusOr<int> CountCudaDevices() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    return absl::UnavailableError(absl::StrCat("no CUDA device: ", cudaGetErrorString(error)));
  }
  if (count <= 0) {
    return absl::UnavailableError("no CUDA device: cudaGetDeviceCount found 0 devices");
  }
  return count;
}

std::string LibraryVersionText() {
  int nccl = 0;
  std::string nccl_text = "NCCL (version unknown)";
  if (ncclGetVersion(&nccl) == ncclSuccess) {
    // Since 2.9 the code is major*10000 + minor*100 + patch.
    nccl_text = absl::StrCat("NCCL ", nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100);
  }
  int runtime = 0;
  std::string cuda_text = "CUDA runtime (version unknown)";
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    cuda_text = absl::StrCat("CUDA runtime ", runtime / 1000, ".", (runtime % 1000) / 10);
  }
  return absl::StrCat(nccl_text, " (", cuda_text, ")");
}

}  // namespace dist_nccl

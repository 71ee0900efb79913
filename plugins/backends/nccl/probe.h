// Can this process run NCCL? Asks the CUDA runtime, which loads and answers
// without a driver, so the plugin always loads and reports the reason.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_PROBE_H_
#define DIST_PLUGINS_BACKENDS_NCCL_PROBE_H_

#include <string>

#include "absl/status/statusor.h"

namespace dist_nccl {

// The number of CUDA devices, or UNAVAILABLE "no CUDA device: <CUDA's
// error text>" (also when there are none).
absl::StatusOr<int> CountCudaDevices();

// "NCCL 2.28.9 (CUDA runtime 13.0)"; works without a GPU.
std::string LibraryVersionText();

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_PROBE_H_

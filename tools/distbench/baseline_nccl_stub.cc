// Built when Bazel found no CUDA toolkit: the NCCL baseline is skipped with
// the reason.
#include "tools/distbench/baseline.h"

namespace distbench {

absl::StatusOr<std::unique_ptr<Baseline>> MakeNcclBaseline(const BaselineSetup&) {
  return absl::UnavailableError(
      "distbench was built without CUDA/NCCL (no CUDA toolkit at build time)");
}

}  // namespace distbench

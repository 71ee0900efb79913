#include "plugins/backends/gloo/algorithm.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace dist_gloo {
namespace {

// On more than two ranks, bcube (log2(W) exchange steps) beat ring
// (2*(W-1) steps) up to 2 MiB in our measurements (0.41-0.87x the time)
// and lost at 16 MiB (1.34x); see README.md, "Algorithm choice".
constexpr size_t kBcubeBelowBytes = 4 * 1024 * 1024;

}  // namespace

absl::StatusOr<AlgorithmPolicy> AlgorithmPolicy::Parse(const std::string& setting) {
  AlgorithmPolicy policy;
  if (setting.empty() || setting == "auto") {
    policy.name_ = "auto";
  } else if (setting == "ring") {
    policy.name_ = "ring";
  } else if (setting == "bcube") {
    policy.name_ = "bcube";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo backend: unknown all_reduce algorithm '", setting,
        "' (option gloo.allreduce_algorithm or DIST_GLOO_ALLREDUCE_ALGORITHM); use auto, ring or bcube"));
  }
  return policy;
}

gloo::AllreduceOptions::Algorithm AlgorithmPolicy::ForAllReduce(size_t bytes, int world_size) const {
  if (std::strcmp(name_, "ring") == 0) return gloo::AllreduceOptions::Algorithm::RING;
  if (std::strcmp(name_, "bcube") == 0) return gloo::AllreduceOptions::Algorithm::BCUBE;
  if (world_size > 2 && bytes < kBcubeBelowBytes) return gloo::AllreduceOptions::Algorithm::BCUBE;
  return gloo::AllreduceOptions::Algorithm::RING;
}

}  // namespace dist_gloo

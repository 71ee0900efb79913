// Which Gloo algorithm runs an all_reduce of a given size. Gloo 0.5's
// allreduce entry point offers ring (segmented, pipelined) and bcube;
// README.md has the measurements behind the default threshold.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_ALGORITHM_H_
#define DIST_PLUGINS_BACKENDS_GLOO_ALGORITHM_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "gloo/allreduce.h"

namespace dist_gloo {

class AlgorithmPolicy {
 public:
  // `setting` is "auto" (or empty), "ring" or "bcube": option
  // gloo.allreduce_algorithm, else env DIST_GLOO_ALLREDUCE_ALGORITHM.
  static absl::StatusOr<AlgorithmPolicy> Parse(const std::string& setting);

  gloo::AllreduceOptions::Algorithm ForAllReduce(size_t bytes, int world_size) const;

  const char* name() const { return name_; }

 private:
  const char* name_ = "auto";
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_ALGORITHM_H_

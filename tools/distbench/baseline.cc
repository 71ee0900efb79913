#include "tools/distbench/baseline.h"

#include "absl/strings/str_cat.h"
#include "tools/distbench/group_util.h"

namespace distbench {

absl::StatusOr<std::unique_ptr<Baseline>> MakeBaseline(const std::string& library,
                                                       const BaselineSetup& setup) {
  std::string chosen = library;
  if (chosen == "auto") {
    const char* backend = dist_backend_name(setup.pg, setup.device.type);
    chosen = backend == nullptr ? "" : backend;
  }
  absl::StatusOr<std::unique_ptr<Baseline>> baseline;
  if (chosen == "gloo") {
    baseline = MakeGlooBaseline(setup);
  } else if (chosen == "mpi" || chosen == "openmpi" || chosen == "mpich") {
    // The MPI this distbench links (distbench: Open MPI, distbench_mpich:
    // MPICH); the core refuses the other build's backend in this process.
    baseline = MakeMpiBaseline(setup);
  } else if (chosen == "nccl") {
    baseline = MakeNcclBaseline(setup);
  } else {
    baseline =
        absl::UnimplementedError(absl::StrCat("no raw library known for backend '", chosen,
                                              "'; use --baseline_library=gloo, mpi or nccl"));
  }
  // Agree: a baseline only some ranks have would hang the others.
  absl::StatusOr<double> failed =
      AllReduceDouble(setup.pg, setup.device, baseline.ok() ? 0.0 : 1.0, DIST_MAX);
  if (!failed.ok()) return failed.status();
  if (!baseline.ok()) return baseline.status();
  if (*failed != 0.0) {
    return absl::UnavailableError(
        absl::StrCat("the ", chosen, " baseline failed on another rank (see its stderr)"));
  }
  return baseline;
}

}  // namespace distbench

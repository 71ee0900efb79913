// The raw library a backend plugin wraps (Gloo, MPI, NCCL), called directly
// in the same processes, so that --baseline can show what the plugin layer
// costs. One implementation per file: baseline_gloo.cc, baseline_mpi.cc,
// baseline_nccl.cc.
#ifndef DIST_TOOLS_DISTBENCH_BASELINE_H_
#define DIST_TOOLS_DISTBENCH_BASELINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/dist.h"
#include "tools/distbench/collectives.h"

namespace distbench {

class Baseline {
 public:
  virtual ~Baseline() = default;

  // "gloo", "mpi", "nccl".
  virtual std::string name() const = 0;
  // What was measured, e.g. "Gloo (tcp transport, 127.0.0.1)".
  virtual std::string description() const = 0;

  // OK when the raw library can run this case, else why not. Must give the
  // same answer on every rank (it depends on the case only).
  virtual absl::Status Supports(const Case& c) const = 0;

  // Runs the case, blocking until this rank's part is done. Buffers as for
  // RunThroughDist.
  virtual absl::Status Run(const Case& c, void* send, void* recv) = 0;

  // The library's alternative ways to run `c` (Gloo's algorithm classes, for
  // example), by name; the benchmark times each and compares the plugin with
  // the fastest, so the ratio is against the best the raw library offers.
  // Index 0 is what Run does. Same answer on every rank.
  virtual std::vector<std::string> Variants(const Case& c) const { return {"default"}; }
  virtual absl::Status RunVariant(const Case& c, int variant, void* send, void* recv) {
    (void)variant;
    return Run(c, send, recv);
  }

  // Lines the ranks up before a timed block.
  virtual absl::Status Barrier() = 0;
};

// What a baseline is built from. Collective over the group.
struct BaselineSetup {
  dist_process_group_t* pg = nullptr;
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;
  int local_world_size = -1;
  dist_device_t device{DIST_DEVICE_CPU, 0};
  int64_t timeout_ms = 300000;
};

absl::StatusOr<std::unique_ptr<Baseline>> MakeGlooBaseline(const BaselineSetup& setup);
absl::StatusOr<std::unique_ptr<Baseline>> MakeMpiBaseline(const BaselineSetup& setup);
absl::StatusOr<std::unique_ptr<Baseline>> MakeNcclBaseline(const BaselineSetup& setup);

// `library` is "gloo", "mpi", "nccl", or "auto" (the library under the
// backend that serves setup.device). Every rank gets a baseline or every rank
// gets the same kind of error: a failure on one rank is shared with all.
absl::StatusOr<std::unique_ptr<Baseline>> MakeBaseline(const std::string& library,
                                                       const BaselineSetup& setup);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_BASELINE_H_

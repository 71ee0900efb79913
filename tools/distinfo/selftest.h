// distinfo --selftest: two local ranks per usable backend run a verified
// all-reduce, broadcast and barrier. The ranks are distinfo itself,
// re-executed in a hidden worker mode (selftest_worker.h); MPI ranks are
// started through mpirun.
#ifndef DIST_TOOLS_DISTINFO_SELFTEST_H_
#define DIST_TOOLS_DISTINFO_SELFTEST_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tools/distinfo/report.h"

namespace dist::distinfo {

struct SelftestStep {
  std::string name;  // "init", "all_reduce", "broadcast", "barrier"
  bool ok = false;
  double ms = 0;      // the slowest rank's time
  std::string error;  // "rank 1: ..." when not ok
};

struct SelftestResult {
  std::string backend;
  bool skipped = false;
  bool passed = false;
  std::string detail;    // why skipped, or what failed
  std::string launcher;  // "local" or the mpirun command line
  absl::Duration elapsed;
  std::vector<SelftestStep> steps;
};

struct SelftestOptions {
  absl::Duration timeout = absl::Seconds(60);  // per backend
  std::string self_exe;                        // distinfo itself
  std::vector<std::string> only;               // backends; empty: all
};

std::vector<SelftestResult> RunSelftests(const Report& report, const SelftestOptions& options);

// The line prefix a worker reports its result with (one JSON object).
inline constexpr char kWorkerMarker[] = "DISTINFO_SELFTEST ";

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_SELFTEST_H_

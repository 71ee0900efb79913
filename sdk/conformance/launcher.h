// dist conformance kit: starts N real processes of this binary (locally or
// under mpirun), bounded by a timeout, merges their results and prints the
// table.
#ifndef DIST_SDK_CONFORMANCE_LAUNCHER_H_
#define DIST_SDK_CONFORMANCE_LAUNCHER_H_

#include <string>
#include <vector>

namespace dist::conformance {

struct LaunchOptions {
  std::string self;                      // this binary
  std::vector<std::string> worker_args;  // passed to every rank
  int world_size = 2;
  std::string launcher = "local";  // "local" or "mpirun"
  std::string mpirun = "mpirun";
  std::string init = "tcp";  // "tcp" (a free loopback port) or "file"
  int timeout_s = 600;
  bool only_failures = false;
  // A run in which every check was skipped (the probe failed) passes, with
  // a DIST_SKIPPED line, instead of failing.
  bool allow_all_skipped = false;
  // --only=failure (failure.h): ranks may die on purpose, and rank 0's rows
  // are the table (the others add their failures).
  bool failure = false;
};

// Returns the exit code: 0 when every rank ran every check and all passed
// (or every check was skipped and allow_all_skipped is set).
int Launch(const LaunchOptions& options);

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_LAUNCHER_H_

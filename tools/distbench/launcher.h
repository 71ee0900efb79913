// `distbench -n N`: starts N local ranks of this same program (env://:
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and
// a free MASTER_PORT), waits for them, and stops the rest when one fails.
#ifndef DIST_TOOLS_DISTBENCH_LAUNCHER_H_
#define DIST_TOOLS_DISTBENCH_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distbench {

struct LaunchOptions {
  int ranks = 2;
  // Arguments for every rank (argv[1..] of this run plus "--n=0").
  std::vector<std::string> args;
  // How long the others get after one rank fails, before SIGKILL.
  absl::Duration grace = absl::Seconds(10);
};

// Returns the exit code to use: 0 when every rank succeeded, else the first
// failing rank's code (128 + signal for a signal). Prints one line per
// failed rank to stderr. SIGINT/SIGTERM are forwarded to the ranks.
int LaunchLocalRanks(const LaunchOptions& options);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_LAUNCHER_H_

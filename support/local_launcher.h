// Runs a few processes on this machine and waits for all of them: the ranks
// of `distbench -n N` and of the SDK conformance kit (or its mpirun). Each
// process runs in its own process group, so a signal sent to it reaches
// what it started too (mpirun's ranks); it dies with the launcher
// (PR_SET_PDEATHSIG). What the processes are (argv, environment) and what
// their ends mean (exit codes, messages) stays with the tool.
//
// distrun does not use this: it is a libuv event loop that also pipes and
// prefixes its ranks' output and forwards signals in stages (see
// tools/distrun/launcher.h).
#ifndef DIST_SUPPORT_LOCAL_LAUNCHER_H_
#define DIST_SUPPORT_LOCAL_LAUNCHER_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dist {

struct LocalProcess {
  std::string name;               // in messages: "rank 0", "mpirun"
  std::string program;            // executed with execvp (a PATH search without a '/')
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::pair<std::string, std::string>> env;  // set over the launcher's own
};

struct LocalLaunchOptions {
  std::string tool;  // starts its messages on stderr ("distbench")
  // After the first failure (an exit code other than 0, or a signal) the
  // others get SIGTERM, and SIGKILL `grace` later; off: they run on.
  bool stop_on_failure = false;
  // SIGINT and SIGTERM sent to the launcher go to every process once, and
  // SIGKILL `grace` later.
  bool forward_signals = false;
  absl::Duration grace = absl::Seconds(10);
  // Past this, every process still running is killed (SIGKILL).
  absl::Duration timeout = absl::InfiniteDuration();
};

struct LocalExit {
  pid_t pid = -1;
  int status = 0;          // as waitpid gives it
  bool timed_out = false;  // killed at LocalLaunchOptions::timeout
};

struct LocalLaunchResult {
  std::vector<LocalExit> exits;  // one per process, in order
  // The first process that failed before the launcher stopped the others
  // (for a failure or a signal); -1 when none did.
  int first_failure = -1;
  int signal = 0;  // the signal forwarded, 0 when none came
};

// Starts every process, then waits for all of them. An error only when a
// process could not be forked (those already started are killed); a program
// that cannot be executed exits with 127 after a line on stderr.
absl::StatusOr<LocalLaunchResult> RunLocalProcesses(const std::vector<LocalProcess>& processes,
                                                    const LocalLaunchOptions& options);

// A shell's exit code for a waitpid status: the code, or 128 + signal.
int ExitCodeOf(int status);

}  // namespace dist

#endif  // DIST_SUPPORT_LOCAL_LAUNCHER_H_

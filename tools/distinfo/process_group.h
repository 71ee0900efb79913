// Runs a few processes at once with their output captured, bounded by a
// deadline: the self-test's ranks (or the mpirun that starts them). Built on
// libuv's process and pipe handles.
#ifndef DIST_TOOLS_DISTINFO_PROCESS_GROUP_H_
#define DIST_TOOLS_DISTINFO_PROCESS_GROUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dist::distinfo {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::vector<std::string> env;   // the whole environment, KEY=VALUE
};

struct ProcessOutcome {
  bool started = false;
  std::string start_error;  // why it did not start
  int64_t exit_code = -1;
  int term_signal = 0;
  bool killed_at_deadline = false;
  bool killed_after_failure = false;
  std::string out, err;

  bool succeeded() const { return started && exit_code == 0 && term_signal == 0; }
  // "exited with code 1", "killed by SIGSEGV", "killed after 60s timeout".
  std::string Describe() const;
};

// Starts every process, each in its own process group, and waits for all of
// them. When `timeout` passes every remaining group gets SIGKILL. When one
// fails, the others get `after_failure` to finish (they usually report the
// lost peer), then SIGKILL.
std::vector<ProcessOutcome> RunProcessGroup(const std::vector<ProcessSpec>& specs,
                                            absl::Duration timeout, absl::Duration after_failure);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_PROCESS_GROUP_H_

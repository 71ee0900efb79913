// Runs functions in forked child processes with a time limit, so that code
// which may crash or hang (a plugin's constructors, initialize or probe)
// takes down only the child. distinfo loads plugins this way.
#ifndef DIST_TOOLS_DISTINFO_CHILD_PROCESS_H_
#define DIST_TOOLS_DISTINFO_CHILD_PROCESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace dist::distinfo {

// A function run in a child: it writes its result to `fd` (see WriteAll)
// and returns the child's exit code.
using ChildFunction = std::function<int(int fd)>;

struct ChildResult {
  std::string output;      // everything the function wrote to its fd
  bool timed_out = false;  // still running at the deadline, so killed
  int exit_code = -1;      // when it exited by itself
  int signal = 0;          // the signal that ended it, when one did

  bool ok() const { return !timed_out && signal == 0 && exit_code == 0; }
};

// Forks one child per function, all at once, and collects what each writes
// until it ends or `timeout` passes; children still running then are killed
// with SIGKILL. In a child, stdout goes to stderr (so a chatty plugin cannot
// corrupt --json) and the child ends with _exit(function's return value).
//
// Call it only while this process has a single thread: the children use
// malloc, locks and dlopen after fork.
std::vector<ChildResult> RunInChildren(const std::vector<ChildFunction>& functions,
                                       absl::Duration timeout);

// write(2) until all of `data` is written or the pipe breaks.
bool WriteAll(int fd, const std::string& data);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_CHILD_PROCESS_H_

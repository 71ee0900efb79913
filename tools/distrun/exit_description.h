// How a process ended, in words: "exited with code 3", "killed by SIGKILL".
#ifndef DIST_TOOLS_DISTRUN_EXIT_DESCRIPTION_H_
#define DIST_TOOLS_DISTRUN_EXIT_DESCRIPTION_H_

#include <cstdint>
#include <string>

#include "tools/common/signal_name.h"

namespace dist::distrun {

using ::dist::tools::SignalName;  // "SIGTERM"

// `term_signal` != 0 means killed by that signal; else `exit_code` counts.
std::string DescribeExit(int64_t exit_code, int term_signal);

// The shell's convention: the exit code, or 128 + the signal.
int ShellExitCode(int64_t exit_code, int term_signal);

}  // namespace dist::distrun

#endif  // DIST_TOOLS_DISTRUN_EXIT_DESCRIPTION_H_

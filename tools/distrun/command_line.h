// Splits distrun's command line into its own flags and the program to run.
//
// Abseil parses flags anywhere on the command line, but everything from the
// program name on belongs to the program (`distrun -n 2 prog --lr 0.1`), so
// the split happens first and only distrun's part goes to Abseil. Flag names
// may be spelled with dashes like torchrun's (--node-rank) and -n is short
// for --nproc_per_node.
#ifndef DIST_TOOLS_DISTRUN_COMMAND_LINE_H_
#define DIST_TOOLS_DISTRUN_COMMAND_LINE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace dist::distrun {

struct SplitCommandLine {
  std::vector<std::string> own;      // argv[0] and distrun's flags
  std::vector<std::string> program;  // PROGRAM ARGS..., may be empty
};

// `takes_value(name)` says whether flag `name` (already normalized) needs a
// value; when it does and the argument has no "=", the next argument is the
// value. An argument "--" ends distrun's flags.
SplitCommandLine SplitArgs(const std::vector<std::string>& args,
                           const std::function<bool(absl::string_view)>& takes_value);

}  // namespace dist::distrun

#endif  // DIST_TOOLS_DISTRUN_COMMAND_LINE_H_

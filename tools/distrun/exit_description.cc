#include "tools/distrun/exit_description.h"

#include <string.h>

#include "absl/strings/str_cat.h"

namespace dist::distrun {

std::string DescribeExit(int64_t exit_code, int term_signal) {
  if (term_signal != 0) {
    return absl::StrCat("killed by ", SignalName(term_signal), " (",
                        sigdescr_np(term_signal) ? sigdescr_np(term_signal) : "unknown signal",
                        ")");
  }
  return absl::StrCat("exited with code ", exit_code);
}

int ShellExitCode(int64_t exit_code, int term_signal) {
  if (term_signal != 0) return 128 + term_signal;
  return static_cast<int>(exit_code & 0xff);
}

}  // namespace dist::distrun

// --help for the dist tools: Abseil's own help text, with exit status 0.
//
// Debian's Abseil (20220623) ends --help with exit status 1, as if asking for
// help were an error, so each tool answers --help itself before
// absl::ParseCommandLine, with the text Abseil would print.
#ifndef DIST_TOOLS_COMMON_HELP_H_
#define DIST_TOOLS_COMMON_HELP_H_

#include <string>

#include "absl/strings/string_view.h"

namespace dist::tools {

// Sets Abseil's usage config: --help and --helpshort list only the flags
// defined in files whose path contains `flag_files` (the tool's own, not
// Abseil's), and --version prints `version` (one line ending in "\n").
void SetToolUsage(absl::string_view flag_files, std::string version);

// Whether argv[1..argc) asks for help (--help, -help or -h) before any "--".
bool WantsHelp(int argc, char** argv);

// Prints what Abseil's --help prints (the program usage message and the flags
// SetToolUsage chose) to stdout and exits with status 0.
[[noreturn]] void PrintHelpAndExit(const char* argv0);

}  // namespace dist::tools

#endif  // DIST_TOOLS_COMMON_HELP_H_

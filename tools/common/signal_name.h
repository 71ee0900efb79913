// Signals in words, for the tools' messages about processes they ran.
#ifndef DIST_TOOLS_COMMON_SIGNAL_NAME_H_
#define DIST_TOOLS_COMMON_SIGNAL_NAME_H_

#include <string>

namespace dist::tools {

// "SIGTERM" for 15; "signal 70" for a number without a name.
std::string SignalName(int signal);

// "SIGSEGV (Segmentation fault)"; "signal 70" for a number without a name.
std::string SignalDescription(int signal);

}  // namespace dist::tools

#endif  // DIST_TOOLS_COMMON_SIGNAL_NAME_H_

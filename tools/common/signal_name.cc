#include "tools/common/signal_name.h"

#include <string.h>

#include "absl/strings/str_cat.h"

namespace dist::tools {

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

std::string SignalDescription(int signal) {
  const char* text = sigdescr_np(signal);
  if (sigabbrev_np(signal) == nullptr || text == nullptr) return SignalName(signal);
  return absl::StrCat(SignalName(signal), " (", text, ")");
}

}  // namespace dist::tools

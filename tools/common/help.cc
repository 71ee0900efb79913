#include "tools/common/help.h"

#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/flags/internal/program_name.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace dist::tools {

void SetToolUsage(absl::string_view flag_files, std::string version) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [files = std::string(flag_files)](absl::string_view path) {
    return absl::StrContains(path, files);
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [version = std::move(version)] { return version; };
  absl::SetFlagsUsageConfig(usage);
}

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h") return true;
  }
  return false;
}

void PrintHelpAndExit(const char* argv0) {
  // What ParseCommandLine would have set; the help text names the program.
  absl::flags_internal::SetProgramInvocationName(argv0);
  // Abseil's own --help path, up to the exit status: the same flags, the
  // same text.
  absl::flags_internal::SetFlagsHelpMode(absl::flags_internal::HelpMode::kImportant);
  absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage());
  std::cout.flush();
  std::exit(0);
}

}  // namespace dist::tools

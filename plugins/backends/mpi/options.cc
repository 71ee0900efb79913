#include "options.h"

#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "progress.h"

namespace dist_mpi {

absl::StatusOr<CommOptions> ParseOptions(const dist_comm_config_t& config) {
  CommOptions options;
  for (size_t i = 0; i < config.num_options; ++i) {
    const dist_kv_t& kv = config.options[i];
    if (kv.key == nullptr || !absl::StartsWith(kv.key, "mpi.")) continue;
    const std::string value = kv.value ? kv.value : "";
    const bool on = value == "1" || value == "true" || value == "on";
    const bool off = value == "0" || value == "false" || value == "off";
    if (!on && !off) {
      return absl::InvalidArgumentError(
          absl::StrCat("mpi: option ", kv.key, "=", value, " is not a boolean; use 0 or 1"));
    }
    if (std::strcmp(kv.key, "mpi.abort_process") == 0) {
      options.abort_process = on;
    } else if (std::strcmp(kv.key, "mpi.progress_thread") == 0) {
      ProgressEngine::Get().set_enabled(on);  // read when MPI initializes
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "mpi: unknown option ", kv.key, "; known: mpi.abort_process, mpi.progress_thread"));
    }
  }
  return options;
}

}  // namespace dist_mpi

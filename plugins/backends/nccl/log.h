// Log lines through the core's host services ("[dist r3 nccl] ..."), so the
// plugin's lines look like every other line of the process.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_LOG_H_
#define DIST_PLUGINS_BACKENDS_NCCL_LOG_H_

#include <string>

#include "dist/host.h"

namespace dist::nccl {

// Set once by the plugin's initialize; NULL before (logging is then off).
void SetHost(const dist_host_api_t* host);

bool LogEnabled(dist_log_level_t level);
void Log(dist_log_level_t level, const std::string& message);

}  // namespace dist::nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_LOG_H_

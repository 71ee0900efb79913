// Logging through the core's host services (one format for the process).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_LOG_H_
#define DIST_PLUGINS_BACKENDS_GLOO_LOG_H_

#include <string>

#include "dist/host.h"

namespace dist::gloo_backend {

void SetHost(const dist_host_api_t* host);
const dist_host_api_t* Host();  // null before initialize
bool LogEnabled(dist_log_level_t level);
void Log(dist_log_level_t level, const std::string& message);

}  // namespace dist::gloo_backend

#endif  // DIST_PLUGINS_BACKENDS_GLOO_LOG_H_

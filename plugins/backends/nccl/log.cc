#include "plugins/backends/nccl/log.h"

#include <atomic>

namespace dist::nccl {
namespace {
std::atomic<const dist_host_api_t*> g_host{nullptr};
}  // namespace

void SetHost(const dist_host_api_t* host) { g_host.store(host); }

bool LogEnabled(dist_log_level_t level) {
  const dist_host_api_t* host = g_host.load();
  return host != nullptr && host->log != nullptr &&
         (host->log_enabled == nullptr || host->log_enabled(level) != 0);
}

void Log(dist_log_level_t level, const std::string& message) {
  if (!LogEnabled(level)) return;
  g_host.load()->log(level, "nccl", message.c_str());
}

}  // namespace dist::nccl

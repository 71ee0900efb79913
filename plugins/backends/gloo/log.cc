#include "plugins/backends/gloo/log.h"

#include <atomic>

namespace dist::gloo_backend {
namespace {
std::atomic<const dist_host_api_t*> g_host{nullptr};
}  // namespace

void SetHost(const dist_host_api_t* host) { g_host.store(host); }

const dist_host_api_t* Host() { return g_host.load(); }

bool LogEnabled(dist_log_level_t level) {
  const dist_host_api_t* host = g_host.load();
  return host != nullptr && host->log != nullptr && host->log_enabled != nullptr && host->log_enabled(level);
}

void Log(dist_log_level_t level, const std::string& message) {
  const dist_host_api_t* host = g_host.load();
  if (host != nullptr && host->log != nullptr) host->log(level, "gloo", message.c_str());
}

}  // namespace dist::gloo_backend

// dist SDK, C++ side: a plugin's log lines, written through the core's host
// services so that every line of the process looks the same
// ("[dist r3 gloo] warn: ..."). The adapters remember the host at initialize.
//
// A NULL `log_enabled` means "no pre-check": the line is formatted and handed
// to `log`, whose level filter still drops it. Before initialize, or with a
// NULL `log`, nothing is written.
//
// The state is one per shared object: plugins are built with a version script
// that keeps every symbol but the entry local (sdk/defs.bzl), so two plugins in
// one process do not share it.
#ifndef DIST_CPP_HOST_LOG_HPP_
#define DIST_CPP_HOST_LOG_HPP_

#include <atomic>
#include <string>

#include "dist/host.h"

namespace dist {

namespace internal {
struct HostState {
  std::atomic<const dist_host_api_t*> host{nullptr};
  std::atomic<const char*> component{"plugin"};
};
inline HostState& Host() {
  static HostState state;
  return state;
}
}  // namespace internal

// Remembers the core's services; `component` (static) names the plugin's lines.
inline void SetHost(const dist_host_api_t* host, const char* component) {
  internal::Host().component.store(component);
  internal::Host().host.store(host);
}

// The core's services; NULL before initialize.
inline const dist_host_api_t* HostApi() { return internal::Host().host.load(); }

// Whether a line at `level` would be written (check before costly formatting).
inline bool LogEnabled(dist_log_level_t level) {
  const dist_host_api_t* host = HostApi();
  if (host == nullptr || host->log == nullptr) return false;
  return host->log_enabled == nullptr || host->log_enabled(level) != 0;
}

inline void Log(dist_log_level_t level, const std::string& message) {
  if (!LogEnabled(level)) return;
  HostApi()->log(level, internal::Host().component.load(), message.c_str());
}

}  // namespace dist

#endif  // DIST_CPP_HOST_LOG_HPP_

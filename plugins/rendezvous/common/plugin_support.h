// Small pieces every rendezvous plugin needs: the host's logger, reading
// hint options, checking resolve()'s arguments and filling its result.
#ifndef DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_
#define DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/ranks.h"

namespace dist::rendezvous {

// Remembers the core's services (each plugin .so has its own copy).
void SetHost(const dist_host_api_t* host);
void Log(dist_log_level_t level, const char* component, const std::string& message);

// The value of hint option `key`, if the caller passed one.
std::optional<std::string> HintOption(const dist_rendezvous_hints_t* hints,
                                      const std::string& key);
// The store's shared secret: hint option "store_token", else $DIST_STORE_TOKEN.
std::string StoreToken(const dist_rendezvous_hints_t* hints);

// Runs a resolve body: checks the arguments, turns the status into an error
// and keeps every C++ exception on this side of the ABI.
dist_error_t* RunResolve(const char* url, int64_t timeout_ms,
                         dist_rendezvous_result_t* result,
                         const std::function<absl::Status()>& body);

void FillResult(const RankInfo& ranks, dist_store_t* store,
                dist_rendezvous_result_t* result);

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_

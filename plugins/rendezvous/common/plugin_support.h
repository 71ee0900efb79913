// Small pieces every rendezvous plugin needs: the host's logger, reading
// hint options, checking resolve()'s arguments and filling its result.
#ifndef DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_
#define DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_

#include <cstdint>
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
std::optional<std::string> HintOption(const dist_rendezvous_hints_t* hints, const std::string& key);
// The store's shared secret: hint option "store_token", else $DIST_STORE_TOKEN.
std::string StoreToken(const dist_rendezvous_hints_t* hints);

// Runs a resolve body: checks the arguments, turns the status into an error
// and keeps every C++ exception on this side of the ABI.
dist_error_t* RunResolve(const char* url, int64_t timeout_ms, dist_rendezvous_result_t* result,
                         const std::function<absl::Status()>& body);

void FillResult(const RankInfo& ranks, dist_store_t* store, dist_rendezvous_result_t* result);

// A plugin's resolve body: its own work, run under RunResolve.
using ResolveBody = absl::Status (*)(const char* url, const dist_rendezvous_hints_t* hints,
                                     int64_t timeout_ms, dist_rendezvous_result_t* result);

dist_error_t* Initialize(const dist_host_api_t* host);  // SetHost

template <ResolveBody kBody>
dist_error_t* Resolve(const char* url, const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                      dist_rendezvous_result_t* result) {
  return RunResolve(url, timeout_ms, result, [&] { return kBody(url, hints, timeout_ms, result); });
}

// The plugin table of a rendezvous plugin named `name` (static strings)
// whose resolve runs `kBody`, filled field by field over a zeroed table
// (sdk/ABI.md), so that fields appended to the ABI stay NULL.
template <ResolveBody kBody>
const dist_rendezvous_plugin_t* PluginTable(const char* name, const char* const* schemes) {
  static const dist_rendezvous_plugin_t table = [&] {
    dist_rendezvous_plugin_t t{};
    t.struct_size = sizeof(t);
    t.abi_major = DIST_RENDEZVOUS_ABI_MAJOR;
    t.abi_minor = DIST_RENDEZVOUS_ABI_MINOR;
    t.name = name;
    t.version = "1.0.0";
    t.schemes = schemes;
    t.initialize = &Initialize;
    t.resolve = &Resolve<kBody>;
    return t;
  }();
  return &table;
}

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_

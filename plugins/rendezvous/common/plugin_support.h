// What every rendezvous plugin's resolve needs beyond the SDK's adapter
// (dist/cpp/rendezvous_adapter.hpp, which owns the table, the struct_size
// rule, the exception guard and logging): reading hint options and filling
// the result.
#ifndef DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_
#define DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_

#include <optional>
#include <string>

#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/ranks.h"

namespace dist::rendezvous {

// The value of hint option `key`, if the caller passed one.
std::optional<std::string> HintOption(const dist_rendezvous_hints_t* hints, const std::string& key);

// Whether the core asks for the store of a running job for a joining
// process (rendezvous ABI 1.2: the hint option dist.join=1).
bool Joining(const dist_rendezvous_hints_t* hints);
// The store's shared secret: hint option "store_token", else $DIST_STORE_TOKEN.
std::string StoreToken(const dist_rendezvous_hints_t* hints);

void FillResult(const RankInfo& ranks, dist_store_t* store, dist_rendezvous_result_t* result);

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_COMMON_PLUGIN_SUPPORT_H_

#include "plugins/rendezvous/common/plugin_support.h"

#include <stdlib.h>

namespace dist::rendezvous {

std::optional<std::string> HintOption(const dist_rendezvous_hints_t* hints,
                                      const std::string& key) {
  // The adapter passed hints that cover every field (sdk/ABI.md).
  if (hints == nullptr || hints->options == nullptr) return std::nullopt;
  for (size_t i = 0; i < hints->num_options; ++i) {
    const dist_kv_t& kv = hints->options[i];
    if (kv.key != nullptr && key == kv.key) {
      return std::string(kv.value == nullptr ? "" : kv.value);
    }
  }
  return std::nullopt;
}

bool Joining(const dist_rendezvous_hints_t* hints) {
  return HintOption(hints, "dist.join") == std::optional<std::string>("1");
}

std::string StoreToken(const dist_rendezvous_hints_t* hints) {
  if (std::optional<std::string> token = HintOption(hints, "store_token")) return *token;
  const char* env = getenv("DIST_STORE_TOKEN");
  return env == nullptr ? "" : env;
}

void FillResult(const RankInfo& ranks, dist_store_t* store, dist_rendezvous_result_t* result) {
  result->rank = ranks.rank;
  result->world_size = ranks.world_size;
  result->local_rank = ranks.local_rank;
  result->local_world_size = ranks.local_world_size;
  result->store = store;
}

}  // namespace dist::rendezvous

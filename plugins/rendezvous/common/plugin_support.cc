#include "plugins/rendezvous/common/plugin_support.h"

#include <stdlib.h>

#include <atomic>
#include <exception>

#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"

namespace dist::rendezvous {
namespace {
std::atomic<const dist_host_api_t*> g_host{nullptr};
}  // namespace

void SetHost(const dist_host_api_t* host) { g_host.store(host); }

void Log(dist_log_level_t level, const char* component, const std::string& message) {
  const dist_host_api_t* host = g_host.load();
  if (host == nullptr || host->log == nullptr) return;
  if (host->log_enabled != nullptr && !host->log_enabled(level)) return;
  host->log(level, component, message.c_str());
}

std::optional<std::string> HintOption(const dist_rendezvous_hints_t* hints,
                                      const std::string& key) {
  // Fields read here exist since ABI 1.0; struct_size guards older callers.
  if (hints == nullptr || hints->struct_size < sizeof(dist_rendezvous_hints_t) ||
      hints->options == nullptr) {
    return std::nullopt;
  }
  for (size_t i = 0; i < hints->num_options; ++i) {
    const dist_kv_t& kv = hints->options[i];
    if (kv.key != nullptr && key == kv.key) {
      return std::string(kv.value == nullptr ? "" : kv.value);
    }
  }
  return std::nullopt;
}

std::string StoreToken(const dist_rendezvous_hints_t* hints) {
  if (std::optional<std::string> token = HintOption(hints, "store_token")) return *token;
  const char* env = getenv("DIST_STORE_TOKEN");
  return env == nullptr ? "" : env;
}

dist_error_t* RunResolve(const char* url, int64_t timeout_ms,
                         dist_rendezvous_result_t* result,
                         const std::function<absl::Status()>& body) {
  if (url == nullptr) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "rendezvous: the URL is NULL; pass an init "
                                                 "method such as env:// or tcp://host:port");
  }
  if (result == nullptr || result->struct_size < sizeof(dist_rendezvous_result_t)) {
    return dist_error_new(DIST_INVALID_ARGUMENT,
                          "rendezvous %s: result is NULL or its struct_size is too small; set "
                          "result.struct_size = sizeof(dist_rendezvous_result_t)",
                          url);
  }
  if (timeout_ms <= 0) {
    return dist_error_new(DIST_INVALID_ARGUMENT,
                          "rendezvous %s: timeout_ms=%lld; pass a positive timeout", url,
                          static_cast<long long>(timeout_ms));
  }
  try {
    return ToError(body());
  } catch (const std::exception& e) {
    return dist_error_new(DIST_INTERNAL, "rendezvous %s: unexpected exception: %s", url,
                          e.what());
  } catch (...) {
    return dist_error_new(DIST_INTERNAL, "rendezvous %s: unexpected exception", url);
  }
}

void FillResult(const RankInfo& ranks, dist_store_t* store,
                dist_rendezvous_result_t* result) {
  result->rank = ranks.rank;
  result->world_size = ranks.world_size;
  result->local_rank = ranks.local_rank;
  result->local_world_size = ranks.local_world_size;
  result->store = store;
}

dist_error_t* Initialize(const dist_host_api_t* host) {
  SetHost(host);
  return nullptr;
}

}  // namespace dist::rendezvous

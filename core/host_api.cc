#include "core/host_api.h"

#include "core/logging.h"
#include "core/prefix_store.h"
#include "core/version.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"

namespace dist {
namespace {

void HostLog(dist_log_level_t level, const char* component, const char* message) {
  LogLine(level, component != nullptr ? component : "plugin", message != nullptr ? message : "");
}

int HostLogEnabled(dist_log_level_t level) { return LogEnabled(level) ? 1 : 0; }

dist_error_t* HostStoreWithPrefix(const dist_store_t* base, const char* prefix,
                                  dist_store_t** out) {
  if (out == nullptr)
    return dist_error_new(DIST_INVALID_ARGUMENT, "store_with_prefix: out is NULL");
  absl::StatusOr<dist_store_t*> store = MakePrefixStore(base, prefix != nullptr ? prefix : "");
  if (!store.ok()) return ToError(store.status());
  *out = *store;
  return nullptr;
}

}  // namespace

const dist_host_api_t* HostApi() {
  // Field by field over a zeroed table (sdk/ABI.md): a field appended later
  // cannot be filled into the wrong slot.
  static const dist_host_api_t api = [] {
    dist_host_api_t table{};
    table.struct_size = sizeof(dist_host_api_t);
    table.abi_major = DIST_BACKEND_ABI_MAJOR;
    table.abi_minor = DIST_BACKEND_ABI_MINOR;
    table.core_version = kCoreVersion;
    table.log = HostLog;
    table.log_enabled = HostLogEnabled;
    table.store_with_prefix = HostStoreWithPrefix;
    return table;
  }();
  return &api;
}

}  // namespace dist

#include "plugins/backends/nccl/testing/loaded_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"

namespace dist_nccl::testing {
namespace {

void LogToStderr(dist_log_level_t level, const char* component, const char* message) {
  static const char* const kNames[] = {"error", "warn", "info", "debug", "trace"};
  const int index = static_cast<int>(level);
  std::fprintf(stderr, "[dist %s] %s: %s\n", component,
               index >= 0 && index < 5 ? kNames[index] : "log", message);
}

int LogEnabled(dist_log_level_t level) {
  const char* setting = std::getenv("DIST_LOG_LEVEL");
  if (setting != nullptr && std::strcmp(setting, "debug") == 0) return 1;
  return level <= DIST_LOG_WARN ? 1 : 0;
}

}  // namespace

const dist_host_api_t* StderrHost() {
  static const dist_host_api_t host = [] {
    dist_host_api_t h{};  // field by field (sdk/ABI.md)
    h.struct_size = sizeof(h);
    h.abi_major = DIST_BACKEND_ABI_MAJOR;
    h.abi_minor = DIST_BACKEND_ABI_MINOR;
    h.core_version = "test";
    h.log = LogToStderr;
    h.log_enabled = LogEnabled;
    return h;
  }();
  return &host;
}

absl::StatusOr<const dist_backend_plugin_t*> LoadBackendPlugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::NotFoundError(absl::StrCat("dlopen ", path, ": ", dlerror()));
  }
  void* entry = dlsym(handle, DIST_BACKEND_ENTRY_SYMBOL);
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, " has no ", DIST_BACKEND_ENTRY_SYMBOL));
  }
  const dist_backend_plugin_t* table = reinterpret_cast<dist_backend_plugin_entry_fn>(entry)();
  if (table == nullptr || table->abi_major != DIST_BACKEND_ABI_MAJOR) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": ABI major mismatch"));
  }
  absl::Status status = dist::TakeError(table->initialize(StderrHost()));
  if (!status.ok()) return status;
  return table;
}

std::string FindNcclPlugin(const std::string& flag_value, const char* argv0) {
  if (!flag_value.empty()) return flag_value;
  const std::string relative = "plugins/backends/nccl/libdist-backend-nccl.so";
  std::vector<std::string> candidates = {relative};
  if (argv0 != nullptr) {
    const std::string self = argv0;
    candidates.push_back(absl::StrCat(self, ".runfiles/dist/", relative));
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) {
      // bazel-bin/plugins/backends/nccl/bench/nccl_bench -> ../libdist-backend-nccl.so
      candidates.push_back(absl::StrCat(self.substr(0, slash), "/../libdist-backend-nccl.so"));
    }
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return relative;
}

}  // namespace dist_nccl::testing

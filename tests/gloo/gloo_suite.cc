#include "tests/gloo/gloo_suite.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "plugins/store/abi_store.h"
#include "plugins/store/file_store.h"

namespace dist_test {
namespace {

void Log(dist_log_level_t level, const char* component, const char* message) {
  std::fprintf(stderr, "[%s pid %d] %d: %s\n", component, getpid(), level, message);
}

int LogEnabled(dist_log_level_t level) { return level <= DIST_LOG_WARN; }

dist_error_t* NoPrefix(const dist_store_t*, const char*, dist_store_t**) {
  return dist_error_new(DIST_UNIMPLEMENTED, "test host: store_with_prefix is not provided");
}

const dist_host_api_t kHost = {sizeof(dist_host_api_t), 1, 1, "test", Log, LogEnabled, NoPrefix};

}  // namespace

const dist_backend_plugin_t* Plugin() {
  // dlopen of //plugins/backends/gloo, initialized with the test host.
  static const dist_backend_plugin_t* plugin = [] {
    const char* srcdir = std::getenv("TEST_SRCDIR");
    const std::string path =
        absl::StrCat(srcdir ? srcdir : ".", "/dist/plugins/backends/gloo/libdist-backend-gloo.so");
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), dlerror());
      std::abort();
    }
    auto entry =
        reinterpret_cast<dist_backend_plugin_entry_fn>(dlsym(handle, DIST_BACKEND_ENTRY_SYMBOL));
    if (entry == nullptr) std::abort();
    const dist_backend_plugin_t* table = entry();
    if (table->initialize(&kHost) != nullptr) std::abort();
    return table;
  }();
  return plugin;
}

dist_store_t* OpenStore(const std::string& path) {
  dist::store::FileStoreOptions options;
  options.path = path;
  options.max_poll_interval = absl::Milliseconds(5);
  auto store = dist::store::FileStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "cannot open file store %s: %s\n", path.c_str(),
                 std::string(store.status().message()).c_str());
    std::_Exit(3);
  }
  return dist::store::MakeAbiStore(*std::move(store), absl::Seconds(30));
}

}  // namespace dist_test

// One rank of a multi-process rendezvous test. Loads a rendezvous plugin
// .so, resolves the URL, then (depending on --mode):
//   exchange: sets worker/<rank>, waits for every rank's key and checks
//             each value, then releases the store;
//   add:      adds 1 to "counter" --count times, waits until every rank is
//             done, and prints the final counter;
//   hold:     prints READY and sleeps (the test kills it).
// Prints "ERROR <CODE>: <message>" and exits 1 when any step fails.
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/cpp/store.hpp"
#include "dist/rendezvous_plugin.h"

ABSL_FLAG(std::string, plugin, "", "path of the plugin .so");
ABSL_FLAG(std::string, url, "", "init method URL");
ABSL_FLAG(int, rank, -1, "rank hint (-1: from URL/env)");
ABSL_FLAG(int, world_size, -1, "world size hint (-1: from URL/env)");
ABSL_FLAG(int64_t, timeout_ms, 20000, "rendezvous and store timeout");
ABSL_FLAG(std::string, mode, "exchange", "exchange | add | hold");
ABSL_FLAG(int, count, 100, "adds per rank in --mode=add");
ABSL_FLAG(std::string, token, "", "store_token hint option (empty: none)");

namespace {

void Log(dist_log_level_t, const char* component, const char* message) {
  fprintf(stderr, "[%s] %s\n", component, message);
}
int LogEnabled(dist_log_level_t level) { return level <= DIST_LOG_WARN; }
dist_error_t* NoPrefix(const dist_store_t*, const char*, dist_store_t**) {
  return dist_error_new(DIST_UNIMPLEMENTED, "no store_with_prefix in the worker");
}

int Fail(const absl::Status& status) {
  printf("ERROR %s: %s\n", dist_error_code_name(static_cast<dist_error_code_t>(status.code())),
         std::string(status.message()).c_str());
  fflush(stdout);
  return 1;
}

int Fail(dist_error_t* error) {
  printf("ERROR %s: %s\n", dist_error_code_name(dist_error_code(error)), dist_error_message(error));
  fflush(stdout);
  dist_error_destroy(error);
  return 1;
}

// Fail, after handing the store back so that nothing leaks. Plain release:
// release_failed would tell the other ranks this rendezvous failed, and the
// tests check that each rank reports its own error.
int FailReleasing(dist_store_t* store, const absl::Status& status) {
  const int code = Fail(status);
  store->release(store->ctx);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string path = absl::GetFlag(FLAGS_plugin);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    printf("ERROR LOAD: %s\n", dlerror());
    return 3;
  }
  auto entry = reinterpret_cast<dist_rendezvous_plugin_entry_fn>(
      dlsym(handle, DIST_RENDEZVOUS_ENTRY_SYMBOL));
  const dist_rendezvous_plugin_t* plugin = entry();
  static const dist_host_api_t host = {
      sizeof(dist_host_api_t), 1, 0, "worker", &Log, &LogEnabled, &NoPrefix};
  if (dist_error_t* error = plugin->initialize(&host)) return Fail(error);

  const std::string token = absl::GetFlag(FLAGS_token);
  dist_kv_t option = {"store_token", token.c_str()};
  dist_rendezvous_hints_t hints = {sizeof(hints), absl::GetFlag(FLAGS_rank),
                                   absl::GetFlag(FLAGS_world_size),
                                   token.empty() ? nullptr : &option, token.empty() ? 0u : 1u};
  dist_rendezvous_result_t result;
  result.struct_size = sizeof(result);
  const int64_t timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  const absl::Duration timeout = absl::Milliseconds(timeout_ms);
  const std::string url = absl::GetFlag(FLAGS_url);
  if (dist_error_t* error = plugin->resolve(url.c_str(), &hints, timeout_ms, &result)) {
    return Fail(error);
  }
  printf("resolved rank=%d world_size=%d local_rank=%d local_world_size=%d\n", result.rank,
         result.world_size, result.local_rank, result.local_world_size);
  const dist::StoreView store(result.store);
  const int rank = result.rank, world = result.world_size;
  const std::string mode = absl::GetFlag(FLAGS_mode);
  int code = 0;
  if (mode == "hold") {
    printf("READY\n");
    absl::SleepFor(absl::Seconds(600));
  } else if (mode == "exchange") {
    absl::Status set = store.Set(absl::StrCat("worker/", rank),
                                 absl::StrCat("value of rank ", rank, " of ", world));
    if (!set.ok()) return FailReleasing(result.store, set);
    int seen = 0;
    for (int r = 0; r < world && code == 0; ++r) {
      absl::StatusOr<std::string> value = store.Get(absl::StrCat("worker/", r), timeout);
      if (!value.ok()) return FailReleasing(result.store, value.status());
      if (*value != absl::StrCat("value of rank ", r, " of ", world)) {
        printf("MISMATCH key worker/%d holds '%s'\n", r, value->c_str());
        code = 2;
      }
      ++seen;
    }
    printf("saw %d keys\n", seen);
  } else if (mode == "add") {
    const int count = absl::GetFlag(FLAGS_count);
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<int64_t> added = store.Add("counter", 1);
      if (!added.ok()) return FailReleasing(result.store, added.status());
    }
    absl::StatusOr<int64_t> finished = store.Add("finished", 1);
    if (!finished.ok()) return FailReleasing(result.store, finished.status());
    if (*finished == world) {
      absl::Status set = store.Set("all_finished", "1");
      if (!set.ok()) return FailReleasing(result.store, set);
    }
    absl::Status waited = store.Wait({"all_finished"}, timeout);
    if (!waited.ok()) return FailReleasing(result.store, waited);
    absl::StatusOr<std::string> counter = store.Get("counter", timeout);
    if (!counter.ok()) return FailReleasing(result.store, counter.status());
    printf("counter=%s\n", counter->c_str());
  } else {
    printf("ERROR ARGS: unknown --mode=%s\n", mode.c_str());
    return 3;
  }
  const absl::Time released = absl::Now();
  result.store->release(result.store->ctx);
  printf("released in %lld ms\n",
         static_cast<long long>(absl::ToInt64Milliseconds(absl::Now() - released)));
  printf(code == 0 ? "OK\n" : "FAILED\n");
  return code;
}

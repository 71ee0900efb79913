// A rendezvous plugin for //tests/abi:store_release_test, built twice: as
// "frozenstore" against the FROZEN ABI 1.0 headers (its store table ends
// before release_failed, struct_size 96) and as "currentstore" against the
// current headers (it fills release_failed). URL: SCHEME://LOG?world_size=N.
// The process is always rank 0 of N, so with N > 1 the core's join check
// times out. The store writes what happens to it into LOG, one line each:
//   created struct_size=S | release | release_failed: REASON
// and the frozen store has a poisoned word right after its table: a core that
// read release_failed beyond struct_size would call it and log "POISON".
#include <cstddef>
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "dist/rendezvous_plugin.h"
#include "support/memory_store.h"

#ifdef STORE_RELEASE_FROZEN
static_assert(DIST_RENDEZVOUS_ABI_MINOR == 0, "this fixture must see the frozen 1.0 headers");
static_assert(sizeof(dist_store_t) == 96, "the frozen 1.0 store table is 96 bytes");
#define FIXTURE_NAME "frozenstore"
#else
static_assert(DIST_RENDEZVOUS_ABI_MINOR >= 1, "this fixture must see the current headers");
#define FIXTURE_NAME "currentstore"
#endif

namespace {

// The table the core sees, then a word that in the frozen build lies where
// ABI 1.1 puts release_failed.
struct Head {
  dist_store_t table;
  void (*after_table)(void* ctx, const char* reason);
};
static_assert(offsetof(Head, after_table) == sizeof(dist_store_t), "no padding after the table");

// The shared in-memory store, plus the table it hands out and the file it
// logs into.
struct LoggedStore : dist::MemoryStore {
  LoggedStore() : MemoryStore("fixture store") {}
  Head head;
  std::string log;
};

LoggedStore* Self(void* ctx) { return static_cast<LoggedStore*>(dist::MemoryStore::Of(ctx)); }

void Log(const std::string& path, const std::string& line) {
  if (FILE* f = std::fopen(path.c_str(), "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

void Release(void* ctx) {
  Log(Self(ctx)->log, "release");
  delete Self(ctx);
}

#ifdef STORE_RELEASE_FROZEN
void Poison(void* ctx, const char*) {
  Log(Self(ctx)->log, "POISON: release_failed was read beyond struct_size");
  delete Self(ctx);
}
#else
void ReleaseFailed(void* ctx, const char* reason) {
  Log(Self(ctx)->log, std::string("release_failed: ") + reason);
  delete Self(ctx);
}
#endif

dist_error_t* Initialize(const dist_host_api_t*) { return nullptr; }

dist_error_t* Resolve(const char* url, const dist_rendezvous_hints_t*, int64_t,
                      dist_rendezvous_result_t* result) {
  const std::string text(url);
  const size_t start = text.find("://");
  const size_t query = text.find("?world_size=");
  int world_size = 0;
  if (start == std::string::npos || query == std::string::npos ||
      !absl::SimpleAtoi(text.substr(query + 12), &world_size) || world_size < 1) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "%s: want %s://LOG?world_size=N, got '%s'",
                          FIXTURE_NAME, FIXTURE_NAME, url);
  }
  auto* store = new LoggedStore();
  store->log = text.substr(start + 3, query - start - 3);
  dist_store_t& t = store->head.table;
  dist::FillMemoryStoreTable(store, &t);
  t.release = Release;
#ifdef STORE_RELEASE_FROZEN
  store->head.after_table = Poison;
#else
  t.release_failed = ReleaseFailed;
  store->head.after_table = nullptr;
#endif
  Log(store->log, "created struct_size=" + std::to_string(t.struct_size));
  result->rank = 0;
  result->world_size = world_size;
  result->local_rank = 0;
  result->local_world_size = 1;
  result->store = &t;
  return nullptr;
}

const char* const kSchemes[] = {FIXTURE_NAME, nullptr};

}  // namespace

extern "C" DIST_EXPORT const dist_rendezvous_plugin_t* dist_rendezvous_plugin_v1(void) {
  // Field by field over a zeroed table (see "struct_size" in sdk/ABI.md).
  static const dist_rendezvous_plugin_t table = [] {
    dist_rendezvous_plugin_t t{};
    t.struct_size = sizeof(t);
    t.abi_major = DIST_RENDEZVOUS_ABI_MAJOR;
    t.abi_minor = DIST_RENDEZVOUS_ABI_MINOR;
    t.name = FIXTURE_NAME;
    t.version = "0.1.0";
    t.schemes = kSchemes;
    t.initialize = Initialize;
    t.resolve = Resolve;
    return t;
  }();
  return &table;
}

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
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/rendezvous_plugin.h"

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

struct MemoryStore {
  Head head;
  std::string log;
  absl::Mutex mu;
  std::map<std::string, std::string> data ABSL_GUARDED_BY(mu);
};

MemoryStore* Self(void* ctx) { return static_cast<MemoryStore*>(ctx); }

void Log(const std::string& path, const std::string& line) {
  if (FILE* f = std::fopen(path.c_str(), "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

void* Copy(const std::string& value) {
  void* out = std::malloc(value.size() + 1);
  std::memcpy(out, value.data(), value.size());
  return out;
}

dist_error_t* Set(void* ctx, const char* key, const void* value, size_t size) {
  absl::MutexLock lock(&Self(ctx)->mu);
  Self(ctx)->data[key] = std::string(static_cast<const char*>(value), size);
  return nullptr;
}

dist_error_t* Get(void* ctx, const char* key, int64_t timeout_ms, void** value, size_t* size) {
  MemoryStore* s = Self(ctx);
  absl::MutexLock lock(&s->mu);
  auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) { return s->data.count(key) > 0; };
  if (!s->mu.AwaitWithTimeout(absl::Condition(&present), absl::Milliseconds(timeout_ms))) {
    return dist_error_new(DIST_DEADLINE_EXCEEDED, "fixture store: key '%s' not set", key);
  }
  *size = s->data[key].size();
  *value = Copy(s->data[key]);
  return nullptr;
}

void FreeValue(void*, void* value) { std::free(value); }

dist_error_t* Add(void* ctx, const char* key, int64_t delta, int64_t* result) {
  absl::MutexLock lock(&Self(ctx)->mu);
  std::string& slot = Self(ctx)->data[key];
  int64_t now = 0;
  if (!slot.empty() && !absl::SimpleAtoi(slot, &now)) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "fixture store: '%s' is not a number", key);
  }
  now += delta;
  slot = std::to_string(now);
  *result = now;
  return nullptr;
}

dist_error_t* CompareSet(void* ctx, const char* key, const void* expected, size_t expected_size,
                         const void* desired, size_t desired_size, void** actual,
                         size_t* actual_size) {
  absl::MutexLock lock(&Self(ctx)->mu);
  auto& data = Self(ctx)->data;
  auto it = data.find(key);
  const bool matches =
      expected == nullptr
          ? it == data.end()
          : it != data.end() &&
                it->second == std::string(static_cast<const char*>(expected), expected_size);
  if (matches) data[key] = std::string(static_cast<const char*>(desired), desired_size);
  const std::string& now = data.count(key) ? data[key] : std::string();
  *actual_size = now.size();
  *actual = Copy(now);
  return nullptr;
}

dist_error_t* Remove(void* ctx, const char* key, int* existed) {
  absl::MutexLock lock(&Self(ctx)->mu);
  const bool gone = Self(ctx)->data.erase(key) > 0;
  if (existed != nullptr) *existed = gone ? 1 : 0;
  return nullptr;
}

dist_error_t* Check(void* ctx, const char* const* keys, size_t n, int* all) {
  absl::MutexLock lock(&Self(ctx)->mu);
  *all = 1;
  for (size_t i = 0; i < n; ++i) {
    if (Self(ctx)->data.count(keys[i]) == 0) *all = 0;
  }
  return nullptr;
}

dist_error_t* Wait(void* ctx, const char* const* keys, size_t n, int64_t timeout_ms) {
  MemoryStore* s = Self(ctx);
  absl::MutexLock lock(&s->mu);
  auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
    for (size_t i = 0; i < n; ++i) {
      if (s->data.count(keys[i]) == 0) return false;
    }
    return true;
  };
  if (!s->mu.AwaitWithTimeout(absl::Condition(&all), absl::Milliseconds(timeout_ms))) {
    return dist_error_new(DIST_DEADLINE_EXCEEDED, "fixture store: keys not set in time");
  }
  return nullptr;
}

dist_error_t* NumKeys(void* ctx, int64_t* count) {
  absl::MutexLock lock(&Self(ctx)->mu);
  *count = static_cast<int64_t>(Self(ctx)->data.size());
  return nullptr;
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
  auto* store = new MemoryStore();
  store->log = text.substr(start + 3, query - start - 3);
  dist_store_t& t = store->head.table;
  t.struct_size = sizeof(dist_store_t);
  t.ctx = store;
  t.set = Set;
  t.get = Get;
  t.free_value = FreeValue;
  t.add = Add;
  t.compare_set = CompareSet;
  t.remove = Remove;
  t.check = Check;
  t.wait = Wait;
  t.num_keys = NumKeys;
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

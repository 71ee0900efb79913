#include "plugins/backends/nccl/testing/memory_store.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dist_nccl::testing {
namespace {

struct MemoryStore {
  dist_store_t table;
  absl::Mutex mu;
  std::map<std::string, std::string> values ABSL_GUARDED_BY(mu);
};

MemoryStore* Of(void* ctx) { return static_cast<MemoryStore*>(ctx); }

absl::Duration Timeout(int64_t timeout_ms) {
  return absl::Milliseconds(timeout_ms < 0 ? 30000 : timeout_ms);
}

void* Copy(const std::string& value) {
  void* out = std::malloc(value.empty() ? 1 : value.size());
  if (!value.empty()) std::memcpy(out, value.data(), value.size());
  return out;
}

dist_error_t* Set(void* ctx, const char* key, const void* value, size_t size) {
  absl::MutexLock lock(&Of(ctx)->mu);
  Of(ctx)->values[key] = std::string(static_cast<const char*>(value), size);
  return nullptr;
}

dist_error_t* Get(void* ctx, const char* key, int64_t timeout_ms, void** value, size_t* size) {
  MemoryStore* store = Of(ctx);
  absl::MutexLock lock(&store->mu);
  const std::string k = key;
  auto present = [store, &k]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(store->mu) {
    return store->values.count(k) > 0;
  };
  if (!store->mu.AwaitWithTimeout(absl::Condition(&present), Timeout(timeout_ms))) {
    return dist_error_new(DIST_DEADLINE_EXCEEDED, "memory store: key '%s' not set within %lld ms",
                          key, static_cast<long long>(timeout_ms));
  }
  const std::string& found = store->values[k];
  *value = Copy(found);
  *size = found.size();
  return nullptr;
}

void FreeValue(void*, void* value) { std::free(value); }

dist_error_t* Add(void* ctx, const char* key, int64_t delta, int64_t* new_value) {
  absl::MutexLock lock(&Of(ctx)->mu);
  std::string& text = Of(ctx)->values[key];
  int64_t current = 0;
  if (!text.empty() && !absl::SimpleAtoi(text, &current)) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "memory store: key '%s' is not an integer", key);
  }
  current += delta;
  text = absl::StrCat(current);
  *new_value = current;
  return nullptr;
}

dist_error_t* CompareSet(void* ctx, const char* key, const void* expected, size_t expected_size,
                         const void* desired, size_t desired_size, void** actual,
                         size_t* actual_size) {
  absl::MutexLock lock(&Of(ctx)->mu);
  auto& values = Of(ctx)->values;
  auto it = values.find(key);
  const bool missing_expected = expected == nullptr && expected_size == 0;
  const bool matches =
      it == values.end()
          ? missing_expected
          : !missing_expected &&
                it->second == std::string(static_cast<const char*>(expected), expected_size);
  if (matches) values[key] = std::string(static_cast<const char*>(desired), desired_size);
  const std::string now = values.count(key) ? values[key] : std::string();
  *actual = Copy(now);
  *actual_size = now.size();
  return nullptr;
}

dist_error_t* Remove(void* ctx, const char* key, int* existed) {
  absl::MutexLock lock(&Of(ctx)->mu);
  const bool erased = Of(ctx)->values.erase(key) > 0;
  if (existed != nullptr) *existed = erased ? 1 : 0;
  return nullptr;
}

dist_error_t* Check(void* ctx, const char* const* keys, size_t num_keys, int* all_exist) {
  absl::MutexLock lock(&Of(ctx)->mu);
  *all_exist = 1;
  for (size_t i = 0; i < num_keys; ++i) {
    if (Of(ctx)->values.count(keys[i]) == 0) *all_exist = 0;
  }
  return nullptr;
}

dist_error_t* Wait(void* ctx, const char* const* keys, size_t num_keys, int64_t timeout_ms) {
  MemoryStore* store = Of(ctx);
  std::vector<std::string> wanted(keys, keys + num_keys);
  absl::MutexLock lock(&store->mu);
  auto all = [store, &wanted]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(store->mu) {
    for (const std::string& key : wanted) {
      if (store->values.count(key) == 0) return false;
    }
    return true;
  };
  if (!store->mu.AwaitWithTimeout(absl::Condition(&all), Timeout(timeout_ms))) {
    std::vector<std::string> missing;
    for (const std::string& key : wanted) {
      if (store->values.count(key) == 0) missing.push_back(key);
    }
    return dist_error_new(DIST_DEADLINE_EXCEEDED, "memory store: keys not set in time: %s",
                          absl::StrJoin(missing, ", ").c_str());
  }
  return nullptr;
}

dist_error_t* NumKeys(void* ctx, int64_t* count) {
  absl::MutexLock lock(&Of(ctx)->mu);
  *count = static_cast<int64_t>(Of(ctx)->values.size());
  return nullptr;
}

void Release(void* ctx) { delete Of(ctx); }

}  // namespace

dist_store_t* NewMemoryStore() {
  MemoryStore* store = new MemoryStore;
  // Field by field over a zeroed table: fields appended to the ABI later
  // stay NULL (optional) without touching this code.
  dist_store_t& t = store->table;
  t = dist_store_t{};
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
  return &store->table;
}

}  // namespace dist_nccl::testing

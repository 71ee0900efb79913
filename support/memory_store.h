// An in-memory key-value store behind dist_store_t, for ranks that are
// threads of one process: the fixture rendezvous plugins
// (//tests/core/fixtures:memory, //tests/abi:frozenstore and :currentstore),
// the nccl tests and the nccl benchmark. The one copy.
//
// Header-only on purpose: it compiles against whichever dist headers the
// including target sees, so a fixture built against the frozen ABI 1.0
// headers (tests/abi/v1_0) gets a 1.0 table, struct_size 96, and never
// touches a field that 1.0 does not have. That is also why the library
// names no dist headers in its deps: the including target brings them.
#ifndef DIST_SUPPORT_MEMORY_STORE_H_
#define DIST_SUPPORT_MEMORY_STORE_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/store.h"

namespace dist {

// The store's state: a map under a mutex. It is the table's ctx. A fixture
// that keeps more per store derives from it and installs its own release.
class MemoryStore {
 public:
  // `name` starts every error message, e.g. "memory store".
  explicit MemoryStore(std::string name) : name_(std::move(name)) {}
  virtual ~MemoryStore() = default;

  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  static MemoryStore* Of(void* ctx) { return static_cast<MemoryStore*>(ctx); }

  dist_error_t* Set(const char* key, const void* value, size_t size) {
    absl::MutexLock lock(&mu_);
    data_[key] = std::string(static_cast<const char*>(value), size);
    return nullptr;
  }

  dist_error_t* Get(const char* key, int64_t timeout_ms, void** value, size_t* size) {
    absl::MutexLock lock(&mu_);
    auto present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return data_.count(key) > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&present), Timeout(timeout_ms))) {
      return dist_error_new(DIST_DEADLINE_EXCEEDED, "%s: key '%s' not set within %s", name_.c_str(),
                            key, absl::FormatDuration(Timeout(timeout_ms)).c_str());
    }
    *size = data_[key].size();
    *value = Copy(data_[key]);
    return nullptr;
  }

  dist_error_t* Add(const char* key, int64_t delta, int64_t* result) {
    absl::MutexLock lock(&mu_);
    std::string& slot = data_[key];
    int64_t now = 0;
    if (!slot.empty() && !absl::SimpleAtoi(slot, &now)) {
      return dist_error_new(DIST_INVALID_ARGUMENT,
                            "%s: key '%s' holds '%s', not a decimal integer; add only to keys "
                            "that add created",
                            name_.c_str(), key, slot.c_str());
    }
    now += delta;
    slot = absl::StrCat(now);
    *result = now;
    return nullptr;
  }

  // As store.h says: expected NULL means "the key is missing".
  dist_error_t* CompareSet(const char* key, const void* expected, size_t expected_size,
                           const void* desired, size_t desired_size, void** actual,
                           size_t* actual_size) {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(key);
    const bool matches =
        expected == nullptr
            ? it == data_.end()
            : it != data_.end() &&
                  it->second == std::string(static_cast<const char*>(expected), expected_size);
    if (matches) data_[key] = std::string(static_cast<const char*>(desired), desired_size);
    it = data_.find(key);
    const std::string now = it == data_.end() ? std::string() : it->second;
    *actual_size = now.size();
    *actual = Copy(now);
    return nullptr;
  }

  dist_error_t* Remove(const char* key, int* existed) {
    absl::MutexLock lock(&mu_);
    const bool erased = data_.erase(key) > 0;
    if (existed != nullptr) *existed = erased ? 1 : 0;
    return nullptr;
  }

  dist_error_t* Check(const char* const* keys, size_t n, int* all) {
    absl::MutexLock lock(&mu_);
    *all = Missing(keys, n).empty() ? 1 : 0;
    return nullptr;
  }

  dist_error_t* Wait(const char* const* keys, size_t n, int64_t timeout_ms) {
    absl::MutexLock lock(&mu_);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return Missing(keys, n).empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all), Timeout(timeout_ms))) {
      return dist_error_new(DIST_DEADLINE_EXCEEDED, "%s: keys not set within %s: %s", name_.c_str(),
                            absl::FormatDuration(Timeout(timeout_ms)).c_str(),
                            absl::StrJoin(Missing(keys, n), ", ").c_str());
    }
    return nullptr;
  }

  dist_error_t* NumKeys(int64_t* count) {
    absl::MutexLock lock(&mu_);
    *count = static_cast<int64_t>(data_.size());
    return nullptr;
  }

 private:
  // store.h: timeout_ms < 0 asks for the store's default.
  static absl::Duration Timeout(int64_t timeout_ms) {
    return absl::Milliseconds(timeout_ms < 0 ? 30000 : timeout_ms);
  }

  // A malloc'ed copy the caller frees with free_value (never NULL).
  static void* Copy(const std::string& value) {
    void* out = std::malloc(value.size() + 1);
    std::memcpy(out, value.data(), value.size());
    return out;
  }

  std::vector<std::string> Missing(const char* const* keys, size_t n) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> missing;
    for (size_t i = 0; i < n; ++i) {
      if (data_.count(keys[i]) == 0) missing.emplace_back(keys[i]);
    }
    return missing;
  }

  const std::string name_;
  absl::Mutex mu_;
  std::map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
};

namespace memory_store_internal {

inline dist_error_t* Set(void* ctx, const char* key, const void* value, size_t size) {
  return MemoryStore::Of(ctx)->Set(key, value, size);
}
inline dist_error_t* Get(void* ctx, const char* key, int64_t timeout_ms, void** value,
                         size_t* size) {
  return MemoryStore::Of(ctx)->Get(key, timeout_ms, value, size);
}
inline void FreeValue(void*, void* value) { std::free(value); }
inline dist_error_t* Add(void* ctx, const char* key, int64_t delta, int64_t* result) {
  return MemoryStore::Of(ctx)->Add(key, delta, result);
}
inline dist_error_t* CompareSet(void* ctx, const char* key, const void* expected,
                                size_t expected_size, const void* desired, size_t desired_size,
                                void** actual, size_t* actual_size) {
  return MemoryStore::Of(ctx)->CompareSet(key, expected, expected_size, desired, desired_size,
                                          actual, actual_size);
}
inline dist_error_t* Remove(void* ctx, const char* key, int* existed) {
  return MemoryStore::Of(ctx)->Remove(key, existed);
}
inline dist_error_t* Check(void* ctx, const char* const* keys, size_t n, int* all) {
  return MemoryStore::Of(ctx)->Check(keys, n, all);
}
inline dist_error_t* Wait(void* ctx, const char* const* keys, size_t n, int64_t timeout_ms) {
  return MemoryStore::Of(ctx)->Wait(keys, n, timeout_ms);
}
inline dist_error_t* NumKeys(void* ctx, int64_t* count) {
  return MemoryStore::Of(ctx)->NumKeys(count);
}
inline void Release(void* ctx) { delete MemoryStore::Of(ctx); }

}  // namespace memory_store_internal

// Zeroes `table` and fills it field by field (never positionally, see
// sdk/ABI.md) for `store`: struct_size (sizeof(dist_store_t) of the headers
// this is compiled against), ctx, the operations, and a `release` that
// deletes the store. Fields past `release` stay NULL; a fixture that wants
// its own release or release_failed sets them afterwards.
inline void FillMemoryStoreTable(MemoryStore* store, dist_store_t* table) {
  namespace ops = memory_store_internal;
  *table = dist_store_t{};
  table->struct_size = sizeof(dist_store_t);
  table->ctx = store;
  table->set = ops::Set;
  table->get = ops::Get;
  table->free_value = ops::FreeValue;
  table->add = ops::Add;
  table->compare_set = ops::CompareSet;
  table->remove = ops::Remove;
  table->check = ops::Check;
  table->wait = ops::Wait;
  table->num_keys = ops::NumKeys;
  table->release = ops::Release;
}

// A new empty store that owns its table: release it with
// store->release(store->ctx).
inline dist_store_t* NewMemoryStore(std::string name = "memory store") {
  struct Owned : MemoryStore {
    using MemoryStore::MemoryStore;
    dist_store_t table;
  };
  auto* store = new Owned(std::move(name));
  FillMemoryStoreTable(store, &store->table);
  return &store->table;
}

}  // namespace dist

#endif  // DIST_SUPPORT_MEMORY_STORE_H_

#include "core/prefix_store.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dist {
namespace {

struct PrefixStore {
  dist_store_t table;  // first member: the handed-out pointer
  const dist_store_t* base;
  std::string prefix;

  std::string Key(const char* key) const { return absl::StrCat(prefix, key); }
};

PrefixStore* Self(void* ctx) { return static_cast<PrefixStore*>(ctx); }

dist_error_t* Set(void* ctx, const char* key, const void* value, size_t size) {
  PrefixStore* s = Self(ctx);
  return s->base->set(s->base->ctx, s->Key(key).c_str(), value, size);
}

dist_error_t* Get(void* ctx, const char* key, int64_t timeout_ms, void** value, size_t* size) {
  PrefixStore* s = Self(ctx);
  return s->base->get(s->base->ctx, s->Key(key).c_str(), timeout_ms, value, size);
}

void FreeValue(void* ctx, void* value) {
  PrefixStore* s = Self(ctx);
  s->base->free_value(s->base->ctx, value);
}

dist_error_t* Add(void* ctx, const char* key, int64_t delta, int64_t* new_value) {
  PrefixStore* s = Self(ctx);
  return s->base->add(s->base->ctx, s->Key(key).c_str(), delta, new_value);
}

dist_error_t* CompareSet(void* ctx, const char* key, const void* expected, size_t expected_size,
                         const void* desired, size_t desired_size, void** actual,
                         size_t* actual_size) {
  PrefixStore* s = Self(ctx);
  return s->base->compare_set(s->base->ctx, s->Key(key).c_str(), expected, expected_size, desired,
                              desired_size, actual, actual_size);
}

dist_error_t* Remove(void* ctx, const char* key, int* existed) {
  PrefixStore* s = Self(ctx);
  return s->base->remove(s->base->ctx, s->Key(key).c_str(), existed);
}

std::vector<std::string> Keys(const PrefixStore* s, const char* const* keys, size_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(s->Key(keys[i]));
  return out;
}

std::vector<const char*> Pointers(const std::vector<std::string>& keys) {
  std::vector<const char*> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) out.push_back(key.c_str());
  return out;
}

dist_error_t* Check(void* ctx, const char* const* keys, size_t n, int* all_exist) {
  PrefixStore* s = Self(ctx);
  const std::vector<std::string> full = Keys(s, keys, n);
  const std::vector<const char*> raw = Pointers(full);
  return s->base->check(s->base->ctx, raw.data(), raw.size(), all_exist);
}

dist_error_t* Wait(void* ctx, const char* const* keys, size_t n, int64_t timeout_ms) {
  PrefixStore* s = Self(ctx);
  const std::vector<std::string> full = Keys(s, keys, n);
  const std::vector<const char*> raw = Pointers(full);
  return s->base->wait(s->base->ctx, raw.data(), raw.size(), timeout_ms);
}

dist_error_t* NumKeys(void* ctx, int64_t* count) {
  PrefixStore* s = Self(ctx);
  return s->base->num_keys(s->base->ctx, count);
}

void Release(void* ctx) { delete Self(ctx); }

}  // namespace

absl::StatusOr<dist_store_t*> MakePrefixStore(const dist_store_t* base, std::string prefix) {
  if (base == nullptr) return absl::InvalidArgumentError("store_with_prefix: base store is NULL");
  auto store = std::make_unique<PrefixStore>();
  store->base = base;
  store->prefix = std::move(prefix);
  dist_store_t& t = store->table;
  t = dist_store_t{};
  t.struct_size = sizeof(dist_store_t);
  t.ctx = store.get();
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
  // A view has no rendezvous of its own to report on (it must not pass a
  // failure on to its base, which it does not own): holders call release.
  t.release_failed = nullptr;
  return &store.release()->table;
}

}  // namespace dist

#include "plugins/store/abi_store.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "dist/cpp/guard.hpp"
#include "dist/cpp/status.hpp"
#include "plugins/store/limits.h"

namespace dist::store {
namespace {

struct Holder {
  dist_store_t table;
  std::unique_ptr<Store> store;
  absl::Duration default_timeout;
  std::function<void(bool failed)> after_release;
  bool failed = false;  // released through release_failed
};

Holder* H(void* ctx) { return static_cast<Holder*>(ctx); }

absl::Duration TimeoutOf(Holder* h, int64_t timeout_ms) {
  return timeout_ms < 0 ? h->default_timeout : absl::Milliseconds(timeout_ms);
}

// The plugin name in the messages of dist::Guard, which keeps every C++
// exception (std::bad_alloc is the one we expect) from crossing the ABI.
constexpr char kName[] = "store";

absl::Status Invalid(const char* what) {
  return absl::InvalidArgumentError(
      absl::StrFormat("store call with %s; pass a valid pointer", what));
}

// Copies a value into a malloc'ed buffer the caller frees with free_value.
absl::Status GiveValue(const std::string& value, void** out, size_t* size) {
  void* buffer = std::malloc(value.empty() ? 1 : value.size());
  if (buffer == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("out of memory for a %zu-byte store value", value.size()));
  }
  if (!value.empty()) std::memcpy(buffer, value.data(), value.size());
  *out = buffer;
  *size = value.size();
  return absl::OkStatus();
}

std::vector<std::string> KeyList(const char* const* keys, size_t count) {
  std::vector<std::string> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) out.emplace_back(keys[i]);
  return out;
}

bool AnyNull(const char* const* keys, size_t count) {
  if (count > 0 && keys == nullptr) return true;
  for (size_t i = 0; i < count; ++i) {
    if (keys[i] == nullptr) return true;
  }
  return false;
}

dist_error_t* Set(void* ctx, const char* key, const void* value, size_t size) {
  return Guard(kName, "set", [&]() -> absl::Status {
    if (key == nullptr) return Invalid("a NULL key");
    if (value == nullptr && size > 0) return Invalid("a NULL value of nonzero size");
    // Checked before the bytes are copied: `size` may not be backed by memory.
    DIST_RETURN_IF_ERROR(ValidateValue(key, size));
    return H(ctx)->store->Set(key, std::string(static_cast<const char*>(value), value ? size : 0));
  });
}

dist_error_t* Get(void* ctx, const char* key, int64_t timeout_ms, void** value, size_t* size) {
  return Guard(kName, "get", [&]() -> absl::Status {
    if (key == nullptr || value == nullptr || size == nullptr) {
      return Invalid("a NULL key or output pointer");
    }
    absl::StatusOr<std::string> got = H(ctx)->store->Get(key, TimeoutOf(H(ctx), timeout_ms));
    if (!got.ok()) return got.status();
    return GiveValue(*got, value, size);
  });
}

void FreeValue(void*, void* value) { std::free(value); }

dist_error_t* Add(void* ctx, const char* key, int64_t delta, int64_t* new_value) {
  return Guard(kName, "add", [&]() -> absl::Status {
    if (key == nullptr || new_value == nullptr) return Invalid("a NULL key or output pointer");
    absl::StatusOr<int64_t> result = H(ctx)->store->Add(key, delta);
    if (!result.ok()) return result.status();
    *new_value = *result;
    return absl::OkStatus();
  });
}

dist_error_t* CompareSet(void* ctx, const char* key, const void* expected, size_t expected_size,
                         const void* desired, size_t desired_size, void** actual,
                         size_t* actual_size) {
  return Guard(kName, "compare_set", [&]() -> absl::Status {
    if (key == nullptr || actual == nullptr || actual_size == nullptr) {
      return Invalid("a NULL key or output pointer");
    }
    if ((expected == nullptr && expected_size > 0) || (desired == nullptr && desired_size > 0)) {
      return Invalid("a NULL value of nonzero size");
    }
    DIST_RETURN_IF_ERROR(ValidateValue(key, expected_size));
    DIST_RETURN_IF_ERROR(ValidateValue(key, desired_size));
    std::optional<std::string> wanted;
    // NULL with size 0 means "the key is missing" (see store.h).
    if (expected != nullptr) {
      wanted.emplace(static_cast<const char*>(expected), expected_size);
    }
    absl::StatusOr<std::string> now = H(ctx)->store->CompareSet(
        key, wanted, std::string(static_cast<const char*>(desired), desired ? desired_size : 0));
    if (!now.ok()) return now.status();
    return GiveValue(*now, actual, actual_size);
  });
}

dist_error_t* Remove(void* ctx, const char* key, int* existed) {
  return Guard(kName, "remove", [&]() -> absl::Status {
    if (key == nullptr) return Invalid("a NULL key");
    absl::StatusOr<bool> removed = H(ctx)->store->Remove(key);
    if (!removed.ok()) return removed.status();
    if (existed != nullptr) *existed = *removed ? 1 : 0;
    return absl::OkStatus();
  });
}

dist_error_t* Check(void* ctx, const char* const* keys, size_t num_keys, int* all_exist) {
  return Guard(kName, "check", [&]() -> absl::Status {
    if (AnyNull(keys, num_keys) || all_exist == nullptr) {
      return Invalid("a NULL key list, key or output pointer");
    }
    absl::StatusOr<bool> all = H(ctx)->store->Check(KeyList(keys, num_keys));
    if (!all.ok()) return all.status();
    *all_exist = *all ? 1 : 0;
    return absl::OkStatus();
  });
}

dist_error_t* Wait(void* ctx, const char* const* keys, size_t num_keys, int64_t timeout_ms) {
  return Guard(kName, "wait", [&]() -> absl::Status {
    if (AnyNull(keys, num_keys)) return Invalid("a NULL key list or key");
    return H(ctx)->store->Wait(KeyList(keys, num_keys), TimeoutOf(H(ctx), timeout_ms));
  });
}

dist_error_t* NumKeys(void* ctx, int64_t* count) {
  return Guard(kName, "num_keys", [&]() -> absl::Status {
    if (count == nullptr) return Invalid("a NULL output pointer");
    absl::StatusOr<int64_t> n = H(ctx)->store->NumKeys();
    if (!n.ok()) return n.status();
    *count = *n;
    return absl::OkStatus();
  });
}

// Nothing can be returned from release: an exception is only logged.
void Release(void* ctx) {
  Holder* h = H(ctx);
  GuardVoid(kName, "release", [&] {
    h->store.reset();
    if (h->after_release) h->after_release(h->failed);
  });
  delete h;
}

// Best effort, like release: the holder is already failing.
void ReleaseFailed(void* ctx, const char* reason) {
  GuardVoid(kName, "release_failed", [&] {
    H(ctx)->failed = true;
    H(ctx)->store->Abandon(reason != nullptr ? reason : "(no reason given)");
  });
  Release(ctx);
}

}  // namespace

dist_store_t* MakeAbiStore(std::unique_ptr<Store> store, absl::Duration default_timeout,
                           std::function<void(bool failed)> after_release) {
  auto* h = new Holder();
  h->store = std::move(store);
  h->default_timeout = default_timeout;
  h->after_release = std::move(after_release);
  dist_store_t& t = h->table;
  t.struct_size = sizeof(dist_store_t);
  t.ctx = h;
  t.set = &Set;
  t.get = &Get;
  t.free_value = &FreeValue;
  t.add = &Add;
  t.compare_set = &CompareSet;
  t.remove = &Remove;
  t.check = &Check;
  t.wait = &Wait;
  t.num_keys = &NumKeys;
  t.release = &Release;
  t.release_failed = &ReleaseFailed;
  return &h->table;
}

}  // namespace dist::store

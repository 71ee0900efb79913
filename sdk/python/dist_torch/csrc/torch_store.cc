#include "torch_store.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "dist/error.h"

namespace dist_torch {
namespace {

struct TorchStore {
  dist_store_t table;  // first: the table's address is the context's
  c10::intrusive_ptr<c10d::Store> store;
};

c10d::Store& Of(void* ctx) { return *static_cast<TorchStore*>(ctx)->store; }

// torch's stores throw; dist's return errors. A wait that ran out is a
// timeout in every torch store's words ("Socket Timeout", "Wait timeout",
// "Timeout waiting for key").
template <typename Body>
dist_error_t* Guard(const char* what, const char* key, Body&& body) {
  try {
    body();
    return nullptr;
  } catch (const std::exception& e) {
    const std::string text = e.what();
    const bool timeout = text.find("imeout") != std::string::npos;
    // c10::Error's what() carries a backtrace after the first line.
    const std::string first_line = text.substr(0, text.find('\n'));
    return dist_error_new(timeout ? DIST_DEADLINE_EXCEEDED : DIST_UNAVAILABLE,
                          "torch store: %s '%s' failed: %s", what, key, first_line.c_str());
  }
}

void* Copy(const std::vector<uint8_t>& bytes) {
  void* out = std::malloc(bytes.empty() ? 1 : bytes.size());
  if (out != nullptr && !bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
  return out;
}

std::vector<uint8_t> Bytes(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  return std::vector<uint8_t>(p, p + size);
}

dist_error_t* Set(void* ctx, const char* key, const void* value, size_t size) {
  return Guard("set", key, [&] { Of(ctx).set(key, Bytes(value, size)); });
}

std::vector<std::string> Keys(const char* const* keys, size_t n) {
  return std::vector<std::string>(keys, keys + n);
}

// Waits by polling check(): torch's TCPStore holds one lock per client for
// the whole of a blocking wait, so a thread of dist waiting for a peer's key
// there would stall this process's other store calls (the very keys the
// peer waits for) until the wait timed out.
void WaitFor(c10d::Store& store, const std::vector<std::string>& keys, int64_t timeout_ms) {
  const auto start = std::chrono::steady_clock::now();
  const auto limit = timeout_ms >= 0 ? std::chrono::milliseconds(timeout_ms) : store.getTimeout();
  auto pause = std::chrono::microseconds(50);
  while (!store.check(keys)) {
    if (std::chrono::steady_clock::now() - start >= limit) {
      std::string names;
      for (const std::string& key : keys) names += (names.empty() ? "" : ", ") + key;
      throw std::runtime_error("Timeout after " + std::to_string(limit.count()) +
                               " ms waiting for " + names);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

dist_error_t* Get(void* ctx, const char* key, int64_t timeout_ms, void** value, size_t* size) {
  return Guard("get", key, [&] {
    c10d::Store& store = Of(ctx);
    WaitFor(store, {key}, timeout_ms);
    const std::vector<uint8_t> bytes = store.get(key);
    *size = bytes.size();
    *value = Copy(bytes);
  });
}

void FreeValue(void*, void* value) { std::free(value); }

dist_error_t* Add(void* ctx, const char* key, int64_t delta, int64_t* new_value) {
  return Guard("add", key, [&] { *new_value = Of(ctx).add(key, delta); });
}

dist_error_t* CompareSet(void* ctx, const char* key, const void* expected, size_t expected_size,
                         const void* desired, size_t desired_size, void** actual,
                         size_t* actual_size) {
  return Guard("compare_set", key, [&] {
    const std::vector<uint8_t> now =
        Of(ctx).compareSet(key, Bytes(expected, expected_size), Bytes(desired, desired_size));
    *actual_size = now.size();
    *actual = Copy(now);
  });
}

dist_error_t* Remove(void* ctx, const char* key, int* existed) {
  return Guard("remove", key, [&] {
    const bool was = Of(ctx).deleteKey(key);
    if (existed != nullptr) *existed = was ? 1 : 0;
  });
}

dist_error_t* Check(void* ctx, const char* const* keys, size_t n, int* all_exist) {
  return Guard("check", n > 0 ? keys[0] : "",
               [&] { *all_exist = Of(ctx).check(Keys(keys, n)) ? 1 : 0; });
}

dist_error_t* Wait(void* ctx, const char* const* keys, size_t n, int64_t timeout_ms) {
  return Guard("wait", n > 0 ? keys[0] : "", [&] { WaitFor(Of(ctx), Keys(keys, n), timeout_ms); });
}

dist_error_t* NumKeys(void* ctx, int64_t* count) {
  return Guard("num_keys", "", [&] { *count = Of(ctx).getNumKeys(); });
}

void Release(void* ctx) { delete static_cast<TorchStore*>(ctx); }

}  // namespace

dist_store_t* NewTorchStore(const c10::intrusive_ptr<c10d::Store>& store) {
  auto* owned = new TorchStore{dist_store_t{}, store};
  dist_store_t& table = owned->table;
  table.struct_size = sizeof(dist_store_t);
  table.ctx = owned;
  table.set = Set;
  table.get = Get;
  table.free_value = FreeValue;
  table.add = Add;
  table.compare_set = CompareSet;
  table.remove = Remove;
  table.check = Check;
  table.wait = Wait;
  table.num_keys = NumKeys;
  table.release = Release;
  return &table;
}

}  // namespace dist_torch

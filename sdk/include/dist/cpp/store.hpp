// dist SDK, C++ side: a thin, non-owning C++ view of a dist_store_t.
#ifndef DIST_CPP_STORE_HPP_
#define DIST_CPP_STORE_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"
#include "dist/store.h"

namespace dist {

class StoreView {
 public:
  explicit StoreView(const dist_store_t* store) : store_(store) {}

  const dist_store_t* raw() const { return store_; }

  absl::Status Set(const std::string& key, const std::string& value) const {
    return TakeError(store_->set(store_->ctx, key.c_str(), value.data(), value.size()));
  }

  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) const {
    void* data = nullptr;
    size_t size = 0;
    DIST_RETURN_IF_ERROR(TakeError(
        store_->get(store_->ctx, key.c_str(), absl::ToInt64Milliseconds(timeout), &data, &size)));
    std::string value(static_cast<const char*>(data), size);
    store_->free_value(store_->ctx, data);
    return value;
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) const {
    int64_t result = 0;
    DIST_RETURN_IF_ERROR(TakeError(store_->add(store_->ctx, key.c_str(), delta, &result)));
    return result;
  }

  // Returns the value stored after the attempt.
  absl::StatusOr<std::string> CompareSet(const std::string& key, const std::string& expected,
                                         const std::string& desired) const {
    void* data = nullptr;
    size_t size = 0;
    DIST_RETURN_IF_ERROR(TakeError(
        store_->compare_set(store_->ctx, key.c_str(), expected.empty() ? nullptr : expected.data(),
                            expected.size(), desired.data(), desired.size(), &data, &size)));
    std::string value(static_cast<const char*>(data), size);
    store_->free_value(store_->ctx, data);
    return value;
  }

  absl::StatusOr<bool> Remove(const std::string& key) const {
    int existed = 0;
    DIST_RETURN_IF_ERROR(TakeError(store_->remove(store_->ctx, key.c_str(), &existed)));
    return existed != 0;
  }

  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) const {
    std::vector<const char*> raw = CStrings(keys);
    int all = 0;
    DIST_RETURN_IF_ERROR(TakeError(store_->check(store_->ctx, raw.data(), raw.size(), &all)));
    return all != 0;
  }

  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) const {
    std::vector<const char*> raw = CStrings(keys);
    return TakeError(
        store_->wait(store_->ctx, raw.data(), raw.size(), absl::ToInt64Milliseconds(timeout)));
  }

  absl::StatusOr<int64_t> NumKeys() const {
    int64_t count = 0;
    DIST_RETURN_IF_ERROR(TakeError(store_->num_keys(store_->ctx, &count)));
    return count;
  }

 private:
  static std::vector<const char*> CStrings(const std::vector<std::string>& keys) {
    std::vector<const char*> raw;
    raw.reserve(keys.size());
    for (const std::string& key : keys) raw.push_back(key.c_str());
    return raw;
  }

  const dist_store_t* store_;
};

}  // namespace dist

#endif  // DIST_CPP_STORE_HPP_

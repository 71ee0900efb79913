#include "tools/distbench/gloo_store.h"

#include "gloo/common/logging.h"

namespace distbench {
namespace {

[[noreturn]] void Throw(dist_error_t* error, const char* what) {
  std::string message = std::string("store ") + what + ": " + dist_error_message(error);
  dist_error_destroy(error);
  throw gloo::EnforceNotMet(__FILE__, __LINE__, "dist store", message);
}

}  // namespace

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  const std::string full = prefix_ + key;
  if (dist_error_t* error = store_->set(store_->ctx, full.c_str(), data.data(), data.size())) {
    Throw(error, "set");
  }
}

std::vector<char> GlooStore::get(const std::string& key) {
  const std::string full = prefix_ + key;
  void* value = nullptr;
  size_t size = 0;
  if (dist_error_t* error = store_->get(store_->ctx, full.c_str(), timeout_ms_, &value, &size)) {
    Throw(error, "get");
  }
  std::vector<char> data(static_cast<char*>(value), static_cast<char*>(value) + size);
  store_->free_value(store_->ctx, value);
  return data;
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(timeout_ms_));
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  std::vector<const char*> raw;
  full.reserve(keys.size());
  for (const std::string& key : keys) full.push_back(prefix_ + key);
  for (const std::string& key : full) raw.push_back(key.c_str());
  const int64_t ms = timeout.count() > 0 ? timeout.count() : timeout_ms_;
  if (dist_error_t* error = store_->wait(store_->ctx, raw.data(), raw.size(), ms)) {
    Throw(error, "wait");
  }
}

}  // namespace distbench

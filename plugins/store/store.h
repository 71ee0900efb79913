// The C++ face of a key-value store. The TCP and file stores implement it;
// abi_store.h turns one into the dist_store_t that plugins hand to the core.
#ifndef DIST_PLUGINS_STORE_STORE_H_
#define DIST_PLUGINS_STORE_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dist::store {

// All methods are thread-safe. Timeouts are absolute durations (> 0).
class Store {
 public:
  virtual ~Store() = default;

  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for the key; DeadlineExceeded names it.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // `expected` nullopt means "the key is missing". Returns the value stored
  // after the attempt.
  virtual absl::StatusOr<std::string> CompareSet(const std::string& key,
                                                 const std::optional<std::string>& expected,
                                                 const std::string& desired) = 0;
  virtual absl::StatusOr<bool> Remove(const std::string& key) = 0;
  virtual absl::StatusOr<bool> Check(const std::vector<std::string>& keys) = 0;
  // Waits until every key has been seen; DeadlineExceeded names the missing.
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) = 0;
  virtual absl::StatusOr<int64_t> NumKeys() = 0;

  // Called once, just before the store is destroyed, when its holder's
  // rendezvous failed because of `reason` (dist_store_t.release_failed).
  // A store that outlives its processes (the file store) keeps the reason
  // for ranks that arrive later; the others have nothing to do.
  virtual void Abandon(const std::string& reason) {}
};

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_STORE_H_

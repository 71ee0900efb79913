// The plain key-value table behind both stores: the TCP server keeps one in
// memory, the file store rebuilds one by replaying its log. Not thread-safe;
// the owner serializes access (event loop thread / file lock).
#ifndef DIST_PLUGINS_STORE_KV_TABLE_H_
#define DIST_PLUGINS_STORE_KV_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace dist::store {

class KvTable {
 public:
  void Set(const std::string& key, std::string value);
  const std::string* Find(const std::string& key) const;
  // The new counter value; an error when the key holds a non-integer.
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta);
  // Returns the value stored after the attempt and whether it was swapped.
  std::string CompareSet(const std::string& key, const std::optional<std::string>& expected,
                         const std::string& desired, bool* swapped);
  bool Remove(const std::string& key);
  std::vector<std::string> Missing(const std::vector<std::string>& keys) const;
  int64_t size() const { return static_cast<int64_t>(map_.size()); }

 private:
  absl::flat_hash_map<std::string, std::string> map_;
};

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_KV_TABLE_H_

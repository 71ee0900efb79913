#include "plugins/store/kv_table.h"

#include "plugins/store/limits.h"

namespace dist::store {

void KvTable::Set(const std::string& key, std::string value) { map_[key] = std::move(value); }

const std::string* KvTable::Find(const std::string& key) const {
  auto it = map_.find(key);
  return it == map_.end() ? nullptr : &it->second;
}

absl::StatusOr<int64_t> KvTable::Add(const std::string& key, int64_t delta) {
  int64_t current = 0;
  if (const std::string* value = Find(key)) {
    absl::StatusOr<int64_t> parsed = ParseCounter(key, *value);
    if (!parsed.ok()) return parsed.status();
    current = *parsed;
  }
  // Wraps like the two's-complement counters of other stores instead of UB.
  const int64_t updated =
      static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(delta));
  map_[key] = std::to_string(updated);
  return updated;
}

std::string KvTable::CompareSet(const std::string& key, const std::optional<std::string>& expected,
                                const std::string& desired, bool* swapped) {
  const std::string* current = Find(key);
  const bool matches =
      expected.has_value() ? (current != nullptr && *current == *expected) : current == nullptr;
  *swapped = matches;
  if (matches) {
    map_[key] = desired;
    return desired;
  }
  return current == nullptr ? std::string() : *current;
}

bool KvTable::Remove(const std::string& key) { return map_.erase(key) > 0; }

std::vector<std::string> KvTable::Missing(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (!map_.contains(key)) missing.push_back(key);
  }
  return missing;
}

}  // namespace dist::store

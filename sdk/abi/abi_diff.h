// Compares two ABI descriptions (the output of abi_gen plus exported
// symbols, see abi_v1.txt) and says what changed and what to do about it.
#ifndef DIST_SDK_ABI_ABI_DIFF_H_
#define DIST_SDK_ABI_ABI_DIFF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dist::abi {

struct Item {
  std::string abi;   // "plugin", "rendezvous" or "host"
  std::string kind;  // struct, field, enum, enum_size, const, version, symbol
  std::string name;
  std::string value;  // the rest of the line
};

// Parses a description; '#' lines and blank lines are comments.
absl::StatusOr<std::vector<Item>> ParseDescription(const std::string& text);

struct Diff {
  std::vector<std::string> breaking;  // removed or changed: never allowed in major 1
  std::vector<std::string> appended;  // allowed with a minor bump
  // ABIs ("plugin", ...) with appended items whose minor version did not grow.
  std::vector<std::string> needs_bump;
  bool versions_changed = false;
  bool empty() const { return breaking.empty() && appended.empty() && !versions_changed; }
};

Diff Compare(const std::vector<Item>& expected, const std::vector<Item>& actual);

// The message for a drift from the checked-in description: what changed and
// what to do (restore, or bump the minor and regenerate). "" when none.
std::string ExplainDrift(const Diff& diff, const std::string& description_path);

// The message when `actual` is not a compatible extension of a frozen
// release (baseline): only the breaking changes matter. "" when compatible.
std::string ExplainIncompatibility(const Diff& diff, const std::string& baseline_name);

}  // namespace dist::abi

#endif  // DIST_SDK_ABI_ABI_DIFF_H_

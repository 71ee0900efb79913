#include "sdk/abi/abi_diff.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dist::abi {
namespace {

std::string Key(const Item& item) { return item.kind + " " + item.name; }

// "size 40 align 8" -> 40; "offset 8 size 4" -> the value after `word`.
long long Number(const std::string& value, const std::string& word) {
  std::vector<std::string> parts = absl::StrSplit(value, ' ', absl::SkipEmpty());
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    long long n = 0;
    if (parts[i] == word && absl::SimpleAtoi(parts[i + 1], &n)) return n;
  }
  return -1;
}

std::string VersionMacro(const std::string& abi) {
  if (abi == "plugin") return "DIST_BACKEND_ABI_MINOR (sdk/include/dist/backend_plugin.h)";
  if (abi == "rendezvous")
    return "DIST_RENDEZVOUS_ABI_MINOR (sdk/include/dist/rendezvous_plugin.h)";
  return "DIST_VERSION_MINOR (sdk/include/dist/dist.h)";
}

std::string Describe(const Item& item) {
  return absl::StrCat(item.kind, " ", item.name, " (", item.value, ")");
}

}  // namespace

absl::StatusOr<std::vector<Item>> ParseDescription(const std::string& text) {
  std::vector<Item> items;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 3));
    if (parts.size() < 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, " '", line, "': want '<abi> <kind> <name> <value>'"));
    }
    items.push_back(Item{parts[0], parts[1], parts[2], parts[3]});
  }
  return items;
}

Diff Compare(const std::vector<Item>& expected, const std::vector<Item>& actual) {
  std::map<std::string, Item> old_items, new_items;
  for (const Item& i : expected) old_items[Key(i)] = i;
  for (const Item& i : actual) new_items[Key(i)] = i;
  Diff diff;
  std::set<std::string> appended_abis;
  std::map<std::string, long long> grown;  // struct -> its old size, when it grew
  for (const Item& old_item : expected) {
    auto it = new_items.find(Key(old_item));
    if (it == new_items.end()) {
      diff.breaking.push_back(absl::StrCat("removed: ", Describe(old_item)));
      continue;
    }
    const Item& now = it->second;
    if (now.value == old_item.value) continue;
    if (old_item.kind == "version") {
      diff.versions_changed = true;
      continue;
    }
    const std::string change =
        absl::StrCat(old_item.kind, " ", old_item.name, ": ", old_item.value, " -> ", now.value);
    if (old_item.kind == "struct" && Number(now.value, "size") > Number(old_item.value, "size") &&
        Number(now.value, "align") == Number(old_item.value, "align")) {
      grown[old_item.name] = Number(old_item.value, "size");
      diff.appended.push_back("grew: " + change);
      appended_abis.insert(now.abi);  // the version that covers it now
    } else if (old_item.kind == "enum" && absl::EndsWith(old_item.name, "_COUNT") &&
               Number("v " + now.value, "v") > Number("v " + old_item.value, "v")) {
      diff.appended.push_back("grew: " + change);
      appended_abis.insert(now.abi);  // the version that covers it now
    } else {
      diff.breaking.push_back("changed: " + change);
    }
  }
  for (const Item& item : actual) {
    if (old_items.count(Key(item)) != 0) continue;
    if (item.kind == "field") {
      const std::string owner = item.name.substr(0, item.name.find('.'));
      const bool owner_is_new = old_items.count("struct " + owner) == 0;
      auto g = grown.find(owner);
      const bool at_end = g != grown.end() && Number(item.value, "offset") >= g->second;
      if (!owner_is_new && !at_end) {
        diff.breaking.push_back(absl::StrCat("inserted: ", Describe(item), " lies inside the old ",
                                             owner, "; new fields go at the end"));
        continue;
      }
    }
    diff.appended.push_back("added: " + Describe(item));
    appended_abis.insert(item.abi);
  }
  // Appending needs the minor of the ABI it belongs to to grow.
  for (const std::string& abi : appended_abis) {
    std::string old_version, new_version;
    for (const Item& i : expected) {
      if (i.abi == abi && i.kind == "version") old_version = i.value;
    }
    for (const Item& i : actual) {
      if (i.abi == abi && i.kind == "version") new_version = i.value;
    }
    if (old_version == new_version) diff.needs_bump.push_back(abi);
  }
  return diff;
}

std::string ExplainDrift(const Diff& diff, const std::string& path) {
  if (diff.empty()) return "";
  std::string out = absl::StrCat("The dist ABI no longer matches ", path, ":\n");
  for (const std::string& line : diff.breaking) absl::StrAppend(&out, "  ", line, "\n");
  for (const std::string& line : diff.appended) absl::StrAppend(&out, "  ", line, "\n");
  if (!diff.breaking.empty()) {
    absl::StrAppend(&out,
                    "This breaks ABI major 1: plugins and programs built against it would "
                    "misread these. Restore the old definitions (within major 1 only appending "
                    "at the end of a struct or enum is allowed; see sdk/ABI.md).\n");
    return out;
  }
  if (!diff.needs_bump.empty()) {
    std::vector<std::string> macros;
    for (const std::string& abi : diff.needs_bump) macros.push_back(VersionMacro(abi));
    absl::StrAppend(&out, "These are compatible appends, but the version did not change: bump ",
                    absl::StrJoin(macros, " and "),
                    ", then regenerate the description with `bazel run //sdk/abi:generate` and "
                    "commit both. If the change was not intended, restore the headers.\n");
    return out;
  }
  absl::StrAppend(&out,
                  "The version was bumped: regenerate the description with "
                  "`bazel run //sdk/abi:generate` and commit it.\n");
  return out;
}

std::string ExplainIncompatibility(const Diff& diff, const std::string& baseline_name) {
  if (diff.breaking.empty()) return "";
  std::string out =
      absl::StrCat("The current ABI is not a compatible extension of ", baseline_name, ":\n");
  for (const std::string& line : diff.breaking) absl::StrAppend(&out, "  ", line, "\n");
  absl::StrAppend(&out, "Plugins built against ", baseline_name,
                  " would misread these. Restore the old layout (see sdk/ABI.md).\n");
  return out;
}

}  // namespace dist::abi

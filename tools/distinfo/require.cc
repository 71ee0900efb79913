#include "tools/distinfo/require.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace dist::distinfo {
namespace {

std::string Searched(const Report& report) {
  std::vector<std::string> dirs;
  for (const SearchDir& dir : report.search_path) dirs.push_back(dir.path);
  return dirs.empty() ? "(no directories)" : absl::StrJoin(dirs, ":");
}

RequirementResult FromEntry(const std::string& name, const PluginEntry& entry) {
  RequirementResult r{name, entry.usable(), ""};
  if (entry.usable()) {
    r.detail = absl::StrCat("ok (", entry.path, entry.library_version.empty() ? "" : ", ",
                            entry.library_version, ")");
  } else {
    r.detail = absl::StrCat(StatusWord(entry), ": ", entry.reason);
    // Crashed and hung ones name their file already.
    if (!absl::StrContains(entry.reason, entry.path)) {
      absl::StrAppend(&r.detail, " (", entry.path, ")");
    }
  }
  return r;
}

}  // namespace

std::vector<RequirementResult> CheckRequirements(const Report& report,
                                                 const std::vector<std::string>& names) {
  std::vector<RequirementResult> results;
  for (const std::string& name : names) {
    absl::string_view scheme = name;
    if (absl::ConsumeSuffix(&scheme, "://")) {
      const PluginEntry* entry = report.FindSchemeOrMpi(std::string(scheme));
      if (entry == nullptr) {
        // A plugin named after the scheme that failed says why.
        for (const PluginEntry& r : report.rendezvous) {
          if (r.name == scheme && r.status != DIST_PLUGIN_SHADOWED) entry = &r;
        }
      }
      if (entry != nullptr) {
        results.push_back(FromEntry(name, *entry));
      } else {
        results.push_back(
            {name, false,
             absl::StrCat("missing: no usable rendezvous plugin handles ", name, " (searched ",
                          Searched(report), "; add its directory to DIST_PLUGIN_PATH)")});
      }
      continue;
    }
    const PluginEntry* entry = report.FindBackendOrMpi(name);
    if (entry != nullptr) {
      results.push_back(FromEntry(name, *entry));
    } else {
      results.push_back(
          {name, false,
           absl::StrCat("missing: no libdist-backend-", name, ".so in ", Searched(report),
                        "; install the plugin or add its directory to DIST_PLUGIN_PATH")});
    }
  }
  return results;
}

}  // namespace dist::distinfo

#include "tools/distinfo/plugin_scan.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dist/registry.h"
#include "tools/common/signal_name.h"
#include "tools/distinfo/child_process.h"
#include "tools/distinfo/plugin_wire.h"

namespace dist::distinfo {
namespace {

// A child writes lines: "stage <step>" before each step that runs plugin
// code, so the parent can tell where it died, then one "list <json>" or
// "entry <json>" with its result.
constexpr absl::string_view kStage = "stage ";
constexpr absl::string_view kList = "list ";
constexpr absl::string_view kEntry = "entry ";
constexpr absl::string_view kStageDlopen = "dlopen";
constexpr absl::string_view kStageActivate = "activate";

// A plugin file, found the way the core finds them.
struct Candidate {
  dist_plugin_kind_t kind;
  std::string path;  // absolute, as the core reports it
  std::string dir;   // the search directory it is in
};

std::string OrEmpty(const char* text) { return text != nullptr ? text : ""; }

std::string FilePrefix(dist_plugin_kind_t kind) {
  return kind == DIST_PLUGIN_BACKEND ? "libdist-backend-" : "libdist-rendezvous-";
}

std::string Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

// The name the core gives a plugin whose table it could not read:
// "libdist-backend-gloo.so" -> "gloo".
std::string NameFromPath(dist_plugin_kind_t kind, const std::string& path) {
  absl::string_view base = path;
  base = base.substr(base.find_last_of('/') + 1);
  absl::ConsumePrefix(&base, FilePrefix(kind));
  absl::ConsumeSuffix(&base, ".so");
  return std::string(base);
}

// In the core's order: every backend file in search order, each directory's
// files sorted by name, then the rendezvous files the same way.
std::vector<Candidate> FindCandidates(const std::vector<std::string>& search_path) {
  std::vector<Candidate> candidates;
  for (dist_plugin_kind_t kind : {DIST_PLUGIN_BACKEND, DIST_PLUGIN_RENDEZVOUS}) {
    for (const std::string& dir : search_path) {
      DIR* handle = opendir(dir.c_str());
      if (handle == nullptr) continue;
      std::vector<std::string> names;
      while (struct dirent* entry = readdir(handle)) {
        const std::string name = entry->d_name;
        if (absl::StartsWith(name, FilePrefix(kind)) && absl::EndsWith(name, ".so")) {
          names.push_back(name);
        }
      }
      closedir(handle);
      std::sort(names.begin(), names.end());
      for (const std::string& name : names) {
        Candidate candidate{kind, Absolute(absl::StrCat(dir, "/", name)), dir};
        const bool seen = std::any_of(
            candidates.begin(), candidates.end(),
            [&](const Candidate& c) { return c.kind == kind && c.path == candidate.path; });
        if (!seen) candidates.push_back(std::move(candidate));
      }
    }
  }
  return candidates;
}

PluginEntry FromInfo(const dist_plugin_info_t& info) {
  PluginEntry entry;
  entry.kind = info.kind;
  entry.name = OrEmpty(info.name);
  entry.path = OrEmpty(info.path);
  entry.status = info.status;
  entry.reason = OrEmpty(info.reason);
  entry.abi_major = info.abi_major;
  entry.abi_minor = info.abi_minor;
  entry.version = OrEmpty(info.version);
  entry.library_version = OrEmpty(info.library_version);
  if (info.kind == DIST_PLUGIN_BACKEND) {
    entry.capabilities = info.capabilities;
    // The core fills capabilities (and their size) only for tables it
    // could read and initialize.
    entry.has_capabilities = info.capabilities.struct_size != 0;
    if (info.capabilities.notes != nullptr) entry.notes = info.capabilities.notes;
    entry.capabilities.notes = nullptr;
  }
  if (info.schemes != nullptr) {
    for (const char* const* s = info.schemes; *s != nullptr; ++s) {
      entry.schemes.emplace_back(*s);
    }
  }
  return entry;
}

// An entry for a file before anything is known from its table.
PluginEntry Unread(const Candidate& candidate) {
  PluginEntry entry;
  entry.kind = candidate.kind;
  entry.path = candidate.path;
  entry.name = NameFromPath(candidate.kind, candidate.path);
  return entry;
}

// A failed dist_load_*: the core's one-line error is the reason. Only
// "unavailable" keeps its own status; the others read "load failed".
void SetLoadError(dist_error_t* error, PluginEntry& entry) {
  entry.status = dist_error_code(error) == DIST_UNAVAILABLE ? DIST_PLUGIN_UNAVAILABLE
                                                            : DIST_PLUGIN_LOAD_FAILED;
  entry.reason = dist_error_message(error);
  dist_error_destroy(error);
}

// --- run in the children ---

int ListAllInChild(int fd) {
  nlohmann::json out = {{"list_error", ""}, {"plugins", nlohmann::json::array()}};
  const dist_plugin_info_t* infos = nullptr;
  size_t count = 0;
  if (dist_error_t* error = dist_list_plugins(&infos, &count)) {
    out["list_error"] = dist_error_message(error);
    dist_error_destroy(error);
  } else {
    for (size_t i = 0; i < count; ++i) out["plugins"].push_back(EntryToWire(FromInfo(infos[i])));
  }
  return WriteAll(fd, absl::StrCat(kList, out.dump(), "\n")) ? 0 : 1;
}

// A loaded plugin's name, version and ABI (backend and rendezvous tables
// start alike).
template <typename Table>
void TakeIdentity(const Table& table, PluginEntry& entry) {
  entry.status = DIST_PLUGIN_OK;
  if (table.name != nullptr && *table.name != '\0') entry.name = table.name;
  entry.version = OrEmpty(table.version);
  entry.abi_major = table.abi_major;
  entry.abi_minor = table.abi_minor;
}

PluginEntry LoadBackendAlone(const Candidate& candidate) {
  PluginEntry entry = Unread(candidate);
  const dist_backend_plugin_t* table = nullptr;
  if (dist_error_t* error = dist_load_backend(candidate.path.c_str(), &table)) {
    SetLoadError(error, entry);
    return entry;
  }
  TakeIdentity(*table, entry);
  if (table->library_version != nullptr) entry.library_version = OrEmpty(table->library_version());
  if (table->get_capabilities != nullptr) {
    dist_backend_capabilities_t& caps = entry.capabilities;
    caps.struct_size = sizeof(caps);
    table->get_capabilities(&caps);
    caps.struct_size = sizeof(caps);
    entry.has_capabilities = true;
    if (caps.notes != nullptr) entry.notes = caps.notes;
    caps.notes = nullptr;
  }
  return entry;
}

// The registry loads a rendezvous plugin by scheme, looking for the file
// named after it first; a plugin that does not handle the scheme its file
// name says makes the core load every plugin here (and a crash of another
// one would then be blamed on this one too).
PluginEntry LoadRendezvousAlone(const Candidate& candidate) {
  PluginEntry entry = Unread(candidate);
  const dist_rendezvous_plugin_t* table = nullptr;
  if (dist_error_t* error = dist_load_rendezvous(entry.name.c_str(), &table)) {
    SetLoadError(error, entry);
    return entry;
  }
  // An earlier file of the same name in the search path wins.
  Dl_info where{};
  const std::string from =
      dladdr(reinterpret_cast<void*>(table->resolve), &where) != 0 && where.dli_fname != nullptr
          ? Absolute(where.dli_fname)
          : "";
  if (from != candidate.path) {
    entry.status = DIST_PLUGIN_SHADOWED;
    entry.reason = absl::StrCat("shadowed by ", from.empty() ? "another plugin" : from,
                                " (earlier in the search path)");
    return entry;
  }
  TakeIdentity(*table, entry);
  for (const char* const* s = table->schemes; s != nullptr && *s != nullptr; ++s) {
    entry.schemes.emplace_back(*s);
  }
  return entry;
}

int LoadOneInChild(const Candidate& candidate, int fd) {
  WriteAll(fd, absl::StrCat(kStage, kStageDlopen, "\n"));
  // dlopen it here first, so that a crash in its constructors is told apart
  // from one in initialize or probe; the core's own dlopen then finds it
  // loaded (same path, same flags) and runs no constructor again.
  dlopen(candidate.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  WriteAll(fd, absl::StrCat(kStage, kStageActivate, "\n"));
  PluginEntry entry = candidate.kind == DIST_PLUGIN_BACKEND ? LoadBackendAlone(candidate)
                                                            : LoadRendezvousAlone(candidate);
  return WriteAll(fd, absl::StrCat(kEntry, EntryToWire(entry).dump(), "\n")) ? 0 : 1;
}

// --- read in the parent ---

struct ChildLines {
  std::string stage;    // the last step it began
  std::string payload;  // the JSON after "list " or "entry ", if it got that far
};

ChildLines ParseLines(const std::string& output) {
  ChildLines lines;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, kStage)) {
      lines.stage = std::string(line);
    } else if (absl::ConsumePrefix(&line, kList) || absl::ConsumePrefix(&line, kEntry)) {
      lines.payload = std::string(line);
    }
  }
  return lines;
}

// How a child that did not finish well ended: "crashed (SIGSEGV ...)".
std::string Ending(const ChildResult& result, absl::Duration timeout) {
  if (result.timed_out) {
    return absl::StrCat("took longer than ", absl::FormatDuration(timeout), " (--load_timeout)");
  }
  if (result.signal != 0)
    return absl::StrCat("crashed with ", tools::SignalDescription(result.signal));
  if (result.exit_code != 0) return absl::StrCat("exited with status ", result.exit_code);
  return "ended without an answer";
}

// The one-line reason for a plugin whose child died or was killed. The status
// word ("crashed", "hung") comes first on the line, so this says the rest:
//   SIGSEGV (Segmentation fault) in the initialize or probe of
//   /d/libdist-backend-x.so; rebuild the plugin or remove it from /d
PluginEntry FaultEntry(const Candidate& candidate, const ChildResult& result,
                       const std::string& stage, absl::Duration timeout) {
  PluginEntry entry = Unread(candidate);
  entry.status = DIST_PLUGIN_LOAD_FAILED;
  entry.fault = result.timed_out ? LoadFault::kHung : LoadFault::kCrashed;
  std::string where;
  if (stage == kStageDlopen || stage.empty()) {
    where = absl::StrCat("while loading ", candidate.path,
                         " (in its constructors or a library it needs)");
  } else {
    where = absl::StrCat(candidate.kind == DIST_PLUGIN_BACKEND ? "in the initialize or probe of "
                                                               : "in the initialize of ",
                         candidate.path);
  }
  std::string what;
  if (result.timed_out) {
    what = absl::StrCat("still running after ", absl::FormatDuration(timeout), " (--load_timeout) ",
                        where, ", so it was killed");
  } else if (result.signal != 0) {
    what = absl::StrCat(tools::SignalDescription(result.signal), " ", where);
  } else if (result.exit_code != 0) {
    what = absl::StrCat("exited the process with status ", result.exit_code, " ", where);
  } else {
    what = absl::StrCat("ended the process without an answer ", where);
  }
  entry.reason = absl::StrCat(
      what, "; ", result.timed_out ? "if a driver or device is wedged, fix that; otherwise " : "",
      "rebuild the plugin or remove it from ", candidate.dir);
  return entry;
}

bool Usable(const PluginEntry& e) {
  return e.fault == LoadFault::kNone &&
         (e.status == DIST_PLUGIN_OK || e.status == DIST_PLUGIN_UNAVAILABLE);
}

// The core's rule: a usable plugin is shadowed by a usable one of the same
// kind and name earlier in the search path.
void MarkShadowed(std::vector<PluginEntry>& entries) {
  for (size_t later = 0; later < entries.size(); ++later) {
    if (!Usable(entries[later])) continue;
    for (size_t earlier = 0; earlier < later; ++earlier) {
      const PluginEntry& e = entries[earlier];
      if (Usable(e) && e.kind == entries[later].kind && e.name == entries[later].name) {
        entries[later].status = DIST_PLUGIN_SHADOWED;
        entries[later].reason =
            absl::StrCat("shadowed by ", e.path, " (earlier in the search path)");
        break;
      }
    }
  }
}

void Split(std::vector<PluginEntry> entries, PluginScan& scan) {
  for (PluginEntry& entry : entries) {
    (entry.kind == DIST_PLUGIN_BACKEND ? scan.backends : scan.rendezvous)
        .push_back(std::move(entry));
  }
}

// The listing child's answer, or why there is none.
absl::StatusOr<PluginScan> ReadListing(const ChildResult& result, absl::Duration timeout) {
  if (!result.ok()) return absl::InternalError(Ending(result, timeout));
  const std::string payload = ParseLines(result.output).payload;
  nlohmann::json list = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.contains("plugins") || !list.contains("list_error")) {
    return absl::InternalError("answered nothing readable");
  }
  PluginScan scan;
  scan.list_error = list["list_error"].get<std::string>();
  std::vector<PluginEntry> entries;
  for (const nlohmann::json& wire : list["plugins"]) {
    absl::StatusOr<PluginEntry> entry = EntryFromWire(wire);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  Split(std::move(entries), scan);
  return scan;
}

}  // namespace

PluginScan ScanPlugins(const std::vector<std::string>& search_path, absl::Duration timeout) {
  std::vector<ChildResult> listing = RunInChildren({ListAllInChild}, timeout);
  absl::StatusOr<PluginScan> scan = ReadListing(listing[0], timeout);
  if (scan.ok()) return *std::move(scan);

  const std::vector<Candidate> candidates = FindCandidates(search_path);
  std::vector<ChildFunction> functions;
  for (const Candidate& candidate : candidates) {
    functions.push_back([&candidate](int fd) { return LoadOneInChild(candidate, fd); });
  }
  std::vector<ChildResult> results = RunInChildren(functions, timeout);
  std::vector<PluginEntry> entries;
  int faults = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const ChildLines lines = ParseLines(results[i].output);
    absl::StatusOr<PluginEntry> entry = absl::InternalError("no answer");
    if (results[i].ok()) {
      nlohmann::json wire = nlohmann::json::parse(lines.payload, nullptr, false);
      if (!wire.is_discarded()) entry = EntryFromWire(wire);
    }
    if (!entry.ok()) {
      entry = FaultEntry(candidates[i], results[i], lines.stage, timeout);
      ++faults;
    }
    entries.push_back(*std::move(entry));
  }
  MarkShadowed(entries);

  PluginScan isolated;
  Split(std::move(entries), isolated);
  isolated.isolation_note = absl::StrCat(
      "loading all plugins in one process ", scan.status().message(),
      ", so each plugin was loaded alone in a process of its own; the reason shown for a "
      "plugin that failed is the core's load error");
  if (faults == 0) {
    absl::StrAppend(&isolated.isolation_note,
                    "; no plugin failed alone: rerun with DIST_LOG_LEVEL=debug to see which "
                    "one the core loaded last");
  }
  return isolated;
}

}  // namespace dist::distinfo

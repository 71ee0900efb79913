#include "tools/distinfo/report.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/distinfo/plugin_scan.h"

namespace dist::distinfo {
namespace {

std::string OrEmpty(const char* text) { return text != nullptr ? text : ""; }

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

template <typename NameFn>
std::vector<std::string> BitNames(uint32_t mask, int count, NameFn name) {
  std::vector<std::string> names;
  for (int bit = 0; bit < 32; ++bit) {
    if ((mask & (1u << bit)) == 0) continue;
    names.push_back(bit < count ? std::string(name(bit))
                                : absl::StrCat("bit", bit));  // from a newer ABI
  }
  return names;
}

}  // namespace

Report CollectReport(const dist_init_options_t* options, absl::Duration load_timeout) {
  Report report;
  report.core_version = OrEmpty(dist_version());

  // The core lists the directory beside libdist.so first, then
  // DIST_PLUGIN_PATH's, made absolute.
  std::vector<std::string> from_env;
  if (const char* env = std::getenv("DIST_PLUGIN_PATH")) {
    for (absl::string_view dir : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      char resolved[PATH_MAX];
      std::string text(dir);
      from_env.push_back(realpath(text.c_str(), resolved) ? resolved : text);
    }
  }
  const char* const* dirs = dist_plugin_search_path();
  for (int i = 0; dirs != nullptr && dirs[i] != nullptr; ++i) {
    SearchDir dir;
    dir.path = dirs[i];
    bool listed = std::find(from_env.begin(), from_env.end(), dir.path) != from_env.end();
    dir.origin = (i == 0 && !listed) ? "beside libdist.so" : "DIST_PLUGIN_PATH";
    dir.exists = IsDirectory(dir.path);
    report.search_path.push_back(dir);
  }

  std::vector<std::string> dirs_searched;
  for (const SearchDir& dir : report.search_path) dirs_searched.push_back(dir.path);
  PluginScan scan = ScanPlugins(dirs_searched, load_timeout);
  report.backends = std::move(scan.backends);
  report.rendezvous = std::move(scan.rendezvous);
  report.list_error = std::move(scan.list_error);
  report.isolation_note = std::move(scan.isolation_note);

  dist_config_entry_t* entries = nullptr;
  size_t num_entries = 0;
  if (dist_error_t* error = dist_resolve_config(options, &entries, &num_entries)) {
    report.config_error = dist_error_message(error);
    dist_error_destroy(error);
  } else {
    for (size_t i = 0; i < num_entries; ++i) {
      report.config.push_back(
          {OrEmpty(entries[i].key), OrEmpty(entries[i].value), OrEmpty(entries[i].source)});
    }
    dist_config_entries_free(entries, num_entries);
  }
  return report;
}

namespace {

// The MPI builds "mpi" may name, in the order the core's rule prefers them.
std::vector<std::string> MpiBuilds() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("OMPI_COMM_WORLD_RANK")) {
    return {"openmpi"};
  }
  if (std::getenv("PMI_RANK") || std::getenv("PMI_SIZE") || std::getenv("PMI_FD")) {
    return {"mpich"};
  }
  return {"openmpi", "mpich"};
}

template <typename Find>
const PluginEntry* FindMpi(const std::string& name, Find find) {
  const PluginEntry* found = find(name);
  if (found != nullptr || name != "mpi") return found;
  for (const std::string& build : MpiBuilds()) {
    const PluginEntry* entry = find(build);
    if (entry != nullptr && entry->usable()) return entry;
    if (found == nullptr) found = entry;
  }
  return found;
}

}  // namespace

const PluginEntry* Report::FindBackendOrMpi(const std::string& name) const {
  return FindMpi(name, [this](const std::string& n) { return FindBackend(n); });
}

const PluginEntry* Report::FindSchemeOrMpi(const std::string& scheme) const {
  return FindMpi(scheme, [this](const std::string& n) { return FindScheme(n); });
}

const PluginEntry* Report::FindBackend(const std::string& name) const {
  for (const PluginEntry& entry : backends) {
    if (entry.name == name && entry.status != DIST_PLUGIN_SHADOWED) {
      return &entry;
    }
  }
  return nullptr;
}

const PluginEntry* Report::FindScheme(const std::string& scheme) const {
  for (const PluginEntry& entry : rendezvous) {
    if (entry.status == DIST_PLUGIN_SHADOWED) continue;
    for (const std::string& s : entry.schemes) {
      if (s == scheme) return &entry;
    }
  }
  return nullptr;
}

const char* StatusWord(const PluginEntry& entry) {
  switch (entry.fault) {
    case LoadFault::kCrashed:
      return "crashed";
    case LoadFault::kHung:
      return "hung";
    case LoadFault::kNone:
      break;
  }
  switch (entry.status) {
    case DIST_PLUGIN_OK:
      return "ok";
    case DIST_PLUGIN_UNAVAILABLE:
      return "unavailable";
    case DIST_PLUGIN_LOAD_FAILED:
      return "load failed";
    case DIST_PLUGIN_BAD_ABI:
      return "bad ABI";
    case DIST_PLUGIN_INIT_FAILED:
      return "init failed";
    case DIST_PLUGIN_SHADOWED:
      return "shadowed";
  }
  return "unknown";
}

const char* StatusId(const PluginEntry& entry) {
  switch (entry.fault) {
    case LoadFault::kCrashed:
      return "crashed";
    case LoadFault::kHung:
      return "hung";
    case LoadFault::kNone:
      break;
  }
  switch (entry.status) {
    case DIST_PLUGIN_OK:
      return "ok";
    case DIST_PLUGIN_UNAVAILABLE:
      return "unavailable";
    case DIST_PLUGIN_LOAD_FAILED:
      return "load_failed";
    case DIST_PLUGIN_BAD_ABI:
      return "bad_abi";
    case DIST_PLUGIN_INIT_FAILED:
      return "init_failed";
    case DIST_PLUGIN_SHADOWED:
      return "shadowed";
  }
  return "unknown";
}

std::vector<std::string> DeviceNames(uint32_t mask) {
  return BitNames(mask, DIST_DEVICE_TYPE_COUNT, [](int bit) {
    return dist_device_type_name(static_cast<dist_device_type_t>(bit));
  });
}

std::vector<std::string> DtypeNames(uint32_t mask) {
  return BitNames(mask, DIST_DTYPE_COUNT,
                  [](int bit) { return dist_dtype_name(static_cast<dist_dtype_t>(bit)); });
}

std::vector<std::string> CollectiveNames(uint32_t mask) {
  return BitNames(mask, DIST_COLLECTIVE_COUNT, [](int bit) {
    return dist_collective_name(static_cast<dist_collective_t>(bit));
  });
}

std::vector<std::string> ReduceOpNames(uint32_t mask) {
  return BitNames(mask, DIST_REDUCE_OP_COUNT,
                  [](int bit) { return dist_reduce_op_name(static_cast<dist_reduce_op_t>(bit)); });
}

std::vector<std::string> FlagNames(uint32_t flags) {
  static constexpr const char* kNames[] = {"subgroups",      "stream_wait", "thread_multiple",
                                           "needs_launcher", "cuda_aware",  "shrink",
                                           "split_ordered"};
  return BitNames(flags, 6, [](int bit) { return kNames[bit]; });
}

}  // namespace dist::distinfo

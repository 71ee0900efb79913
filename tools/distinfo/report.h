// Everything distinfo reports, gathered from the core's registry into plain
// data first, so the text and JSON renderings and --require read the same.
#ifndef DIST_TOOLS_DISTINFO_REPORT_H_
#define DIST_TOOLS_DISTINFO_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "dist/registry.h"

namespace dist::distinfo {

// Set by distinfo, beyond the core's statuses, when the child process that
// loaded the plugin died (a crash in its constructors, initialize or probe)
// or was killed at --load_timeout.
enum class LoadFault { kNone, kCrashed, kHung };

struct PluginEntry {
  dist_plugin_kind_t kind = DIST_PLUGIN_BACKEND;
  std::string name;
  std::string path;
  dist_plugin_status_t status = DIST_PLUGIN_LOAD_FAILED;
  LoadFault fault = LoadFault::kNone;  // then status is DIST_PLUGIN_LOAD_FAILED
  std::string reason;                  // empty when OK
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  std::string version;
  std::string library_version;
  // Backends whose table could be read (OK or UNAVAILABLE; SHADOWED ones
  // too when the core read them).
  bool has_capabilities = false;
  // capabilities.notes is always NULL: the plugin's text lives in notes,
  // since the plugin was loaded in another process.
  dist_backend_capabilities_t capabilities{};
  std::optional<std::string> notes;
  std::vector<std::string> schemes;  // rendezvous

  bool usable() const { return status == DIST_PLUGIN_OK && fault == LoadFault::kNone; }
};

struct SearchDir {
  std::string path;
  std::string origin;  // "beside libdist.so" or "DIST_PLUGIN_PATH"
  bool exists = false;
};

struct ConfigRow {
  std::string key, value, source;
};

struct Report {
  std::string core_version;
  std::vector<SearchDir> search_path;
  std::vector<PluginEntry> backends;
  std::vector<PluginEntry> rendezvous;
  std::string list_error;  // dist_list_plugins failed (then no plugins)
  // Set when listing all plugins in one process failed (a plugin crashed or
  // hung), so each was loaded alone: says so and what is approximate.
  std::string isolation_note;
  std::vector<ConfigRow> config;
  std::string config_error;  // dist_resolve_config failed

  // The backend that a dist_init by this name would use: the first
  // non-shadowed entry of that name, or nullptr.
  const PluginEntry* FindBackend(const std::string& name) const;
  // FindBackend/FindScheme, where "mpi" is the MPI build the core would pick
  // (core/mpi_flavor.h): the launcher's (OMPI_COMM_WORLD_* -> openmpi, PMI_*
  // -> mpich), and without a launcher the first usable of openmpi, mpich.
  const PluginEntry* FindBackendOrMpi(const std::string& name) const;
  const PluginEntry* FindSchemeOrMpi(const std::string& scheme) const;
  // The rendezvous plugin handling `scheme` ("tcp"), or nullptr.
  const PluginEntry* FindScheme(const std::string& scheme) const;
};

// Asks the core. `options` (may be NULL) is what dist_resolve_config gets.
// The plugins are loaded and probed in child processes (see plugin_scan.h),
// each bounded by `load_timeout`; this process loads none. Call it while the
// process has a single thread (it forks).
Report CollectReport(const dist_init_options_t* options, absl::Duration load_timeout);

// "ok", "unavailable", "load failed", "bad ABI", "init failed", "shadowed",
// and "crashed" or "hung" for a LoadFault.
const char* StatusWord(const PluginEntry& entry);
// The same as an identifier for JSON: "ok", "load_failed", ...
const char* StatusId(const PluginEntry& entry);

// Names of the bits set in capability masks, in enum order.
std::vector<std::string> DeviceNames(uint32_t mask);
std::vector<std::string> DtypeNames(uint32_t mask);
std::vector<std::string> CollectiveNames(uint32_t mask);
std::vector<std::string> ReduceOpNames(uint32_t mask);
std::vector<std::string> FlagNames(uint32_t flags);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_REPORT_H_

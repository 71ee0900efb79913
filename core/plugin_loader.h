// Finds, loads and checks plugins.
//
// Plugins live in <dir of libdist.so>/dist/plugins, then in the directories
// of DIST_PLUGIN_PATH, or at an explicit path. Each is dlopen'ed with
// RTLD_LOCAL, its versioned entry symbol resolved, its table checked (equal
// ABI major, struct_size large enough for ABI 1.0) and copied into a
// zero-filled table of the current size, so fields a plugin built against
// an older minor lacks read as NULL. Plugins are never unloaded: errors and
// tables they hand out stay valid for the whole process.
#ifndef DIST_CORE_PLUGIN_LOADER_H_
#define DIST_CORE_PLUGIN_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dist/backend_plugin.h"
#include "dist/registry.h"
#include "dist/rendezvous_plugin.h"

namespace dist {

// One plugin file and what happened when it was loaded.
struct PluginRecord {
  dist_plugin_kind_t kind = DIST_PLUGIN_BACKEND;
  std::string name;  // from the table, else from the file name
  std::string path;
  dist_plugin_status_t status = DIST_PLUGIN_LOAD_FAILED;
  std::string reason;  // empty when OK
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  std::string version;
  std::string library_version;
  dist_backend_plugin_t backend{};  // zero-filled copy (backends)
  dist_rendezvous_plugin_t rendezvous{};
  dist_backend_capabilities_t capabilities{};
  std::vector<std::string> schemes;
  std::vector<const char*> scheme_pointers;  // NULL-terminated view of schemes
  // Set by ListAll when a plugin of the same kind and name comes earlier in
  // the search path; such a plugin is listed but never chosen by name.
  std::string shadowed_by;
  // Refused before dlopen (not a complete ELF shared object, or writable by
  // other users); the reason then names the file and the fix.
  bool refused = false;
};

class PluginRegistry {
 public:
  static PluginRegistry& Get();

  // The directories searched, in order: <libdir>/dist/plugins, then the
  // absolute entries of DIST_PLUGIN_PATH (see SearchPathError).
  std::vector<std::string> SearchPath() const;

  // Loads a backend by name ("gloo": libdist-backend-gloo.so in the search
  // path) or path (anything with a '/'). A backend whose probe failed is
  // DIST_UNAVAILABLE with the probe's reason.
  absl::StatusOr<const PluginRecord*> LoadBackend(const std::string& name_or_path);

  // The rendezvous plugin handling `scheme`: libdist-rendezvous-<scheme>.so.
  absl::StatusOr<const PluginRecord*> LoadRendezvous(const std::string& scheme);

  // Every plugin file in the search path (scanned once). Loads them all:
  // distinfo calls this in a child process of its own.
  std::vector<const PluginRecord*> ListAll();

 private:
  PluginRegistry() = default;

  // Loads one file (or returns the record for it); never fails: failures are
  // in the record.
  const PluginRecord* LoadFile(dist_plugin_kind_t kind, const std::string& path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> FindFiles(const std::string& file_prefix) const;
  // The one place a name becomes a file: the first
  // libdist-{backend,rendezvous}-<name>.so in the search path, by file name
  // alone (nothing is loaded). A miss lists the names the files there carry.
  absl::StatusOr<std::string> ResolveByName(dist_plugin_kind_t kind, const std::string& name) const;
  std::string AvailableNames(dist_plugin_kind_t kind) const;
  void ScanAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::vector<std::unique_ptr<PluginRecord>> records_ ABSL_GUARDED_BY(mu_);
  bool scanned_ ABSL_GUARDED_BY(mu_) = false;
};

// Whether `text` names a file rather than a plugin: it has a '/' ("./x.so",
// "/a/b.so"); a bare "x.so" is a name.
bool LooksLikePath(const std::string& text);

// InvalidArgument when DIST_PLUGIN_PATH has a relative entry (such entries
// are left out of the search path).
absl::Status SearchPathError();

// The status of a loaded record as an error for a user who asked for it.
absl::Status RecordStatus(const PluginRecord& record);

}  // namespace dist

#endif  // DIST_CORE_PLUGIN_LOADER_H_

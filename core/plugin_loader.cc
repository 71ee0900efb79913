#include "core/plugin_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/elf_check.h"
#include "core/host_api.h"
#include "core/logging.h"
#include "core/mpi_flavor.h"
#include "core/plugin_permissions.h"
#include "dist/cpp/status.hpp"

namespace dist {
namespace {

// ABI 1.0's backend table ends right before the first field appended in 1.1.
constexpr size_t kMinBackendTableSize = offsetof(dist_backend_plugin_t, work_wait_stream);
constexpr size_t kMinRendezvousTableSize = sizeof(dist_rendezvous_plugin_t);

const char* KindWord(dist_plugin_kind_t kind) {
  return kind == DIST_PLUGIN_BACKEND ? "backend" : "rendezvous";
}

std::string FilePrefix(dist_plugin_kind_t kind) {
  return absl::StrCat("libdist-", KindWord(kind), "-");
}

std::string CoreAbi(dist_plugin_kind_t kind) {
  return kind == DIST_PLUGIN_BACKEND
             ? absl::StrCat(DIST_BACKEND_ABI_MAJOR, ".", DIST_BACKEND_ABI_MINOR)
             : absl::StrCat(DIST_RENDEZVOUS_ABI_MAJOR, ".", DIST_RENDEZVOUS_ABI_MINOR);
}

// "libdist-backend-gloo.so" -> "gloo".
std::string NameFromPath(dist_plugin_kind_t kind, const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  const std::string prefix = FilePrefix(kind);
  if (absl::StartsWith(base, prefix)) base = base.substr(prefix.size());
  if (absl::EndsWith(base, ".so")) base.resize(base.size() - 3);
  return base;
}

std::string DirOfCore() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&DirOfCore), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  char resolved[PATH_MAX];
  if (realpath(info.dli_fname, resolved) == nullptr) return "";
  std::string path(resolved);
  return path.substr(0, path.find_last_of('/'));
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return path;
  return resolved;
}

// Looks for an entry symbol of another major to explain a mismatch.
std::string OtherMajorHint(void* handle, dist_plugin_kind_t kind) {
  for (int major = 0; major <= 9; ++major) {
    if (major == 1) continue;
    const std::string symbol = absl::StrCat("dist_", KindWord(kind), "_plugin_v", major);
    if (dlsym(handle, symbol.c_str()) != nullptr) {
      return absl::StrCat(" (it exports ", symbol, ": built for ABI major ", major,
                          "; rebuild it against this SDK's headers or use a matching core)");
    }
  }
  return " (not a dist plugin, or its entry symbol is hidden: export it with DIST_EXPORT)";
}

void FillBackend(PluginRecord& record, const dist_backend_plugin_t* table) {
  if (table->struct_size < kMinBackendTableSize) {
    record.status = DIST_PLUGIN_BAD_ABI;
    record.reason = absl::StrCat("plugin table is ", table->struct_size,
                                 " bytes, smaller than ABI 1.0's ", kMinBackendTableSize,
                                 ": the plugin is corrupt or not built with the dist SDK");
    return;
  }
  std::memcpy(&record.backend, table, std::min(table->struct_size, sizeof(record.backend)));
  record.backend.struct_size = sizeof(record.backend);
  record.abi_major = table->abi_major;
  record.abi_minor = table->abi_minor;
}

void FillRendezvous(PluginRecord& record, const dist_rendezvous_plugin_t* table) {
  if (table->struct_size < kMinRendezvousTableSize) {
    record.status = DIST_PLUGIN_BAD_ABI;
    record.reason = absl::StrCat("plugin table is ", table->struct_size,
                                 " bytes, smaller than ABI 1.0's ", kMinRendezvousTableSize,
                                 ": the plugin is corrupt or not built with the dist SDK");
    return;
  }
  std::memcpy(&record.rendezvous, table, std::min(table->struct_size, sizeof(record.rendezvous)));
  record.rendezvous.struct_size = sizeof(record.rendezvous);
  record.abi_major = table->abi_major;
  record.abi_minor = table->abi_minor;
}

// Runs initialize, then the probe; fills the descriptive fields.
void Activate(PluginRecord& record) {
  const bool backend = record.kind == DIST_PLUGIN_BACKEND;
  const uint32_t core_major = backend ? DIST_BACKEND_ABI_MAJOR : DIST_RENDEZVOUS_ABI_MAJOR;
  const char* name = backend ? record.backend.name : record.rendezvous.name;
  const char* version = backend ? record.backend.version : record.rendezvous.version;
  if (name != nullptr && *name != '\0') record.name = name;
  if (version != nullptr) record.version = version;
  if (record.abi_major != core_major) {
    record.status = DIST_PLUGIN_BAD_ABI;
    record.reason = absl::StrCat("plugin ABI ", record.abi_major, ".", record.abi_minor,
                                 " does not match the core's ABI ", CoreAbi(record.kind),
                                 ": majors must be equal; rebuild the plugin against this SDK");
    return;
  }
  auto initialize = backend ? record.backend.initialize : record.rendezvous.initialize;
  const bool has_ops =
      backend ? (record.backend.comm_create != nullptr && record.backend.work_wait != nullptr &&
                 record.backend.work_destroy != nullptr)
              : record.rendezvous.resolve != nullptr;
  if (name == nullptr || !has_ops) {
    record.status = DIST_PLUGIN_BAD_ABI;
    record.reason =
        "plugin table lacks a required field (name, comm_create, work_wait, "
        "work_destroy or resolve)";
    return;
  }
  if (initialize != nullptr) {
    absl::Status status = TakeError(initialize(HostApi()));
    if (!status.ok()) {
      record.status = DIST_PLUGIN_INIT_FAILED;
      record.reason = absl::StrCat("initialize failed: ", status.message());
      return;
    }
  }
  if (backend) {
    if (record.backend.library_version != nullptr) {
      const char* library = record.backend.library_version();
      if (library != nullptr) record.library_version = library;
    }
    if (record.backend.get_capabilities != nullptr) {
      record.capabilities.struct_size = sizeof(record.capabilities);
      record.backend.get_capabilities(&record.capabilities);
      record.capabilities.struct_size = sizeof(record.capabilities);
    }
    if (record.backend.probe != nullptr) {
      absl::Status probe = TakeError(record.backend.probe());
      if (!probe.ok()) {
        record.status = DIST_PLUGIN_UNAVAILABLE;
        record.reason = std::string(probe.message());
        return;
      }
    }
  } else if (record.rendezvous.schemes != nullptr) {
    for (const char* const* s = record.rendezvous.schemes; *s != nullptr; ++s) {
      record.schemes.push_back(*s);
    }
  }
  record.status = DIST_PLUGIN_OK;
  record.reason.clear();
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The file as given (`path`, perhaps a link in a search directory) and as
// resolved (`absolute`): its directories and the file itself must be
// writable only by their owner, and the file must be a complete ELF shared
// object, before dlopen runs any of it.
absl::Status CheckBeforeLoading(const std::string& path, const std::string& absolute) {
  std::vector<std::string> dirs = {DirName(absolute)};
  if (DirName(path) != dirs[0]) dirs.push_back(DirName(path));
  for (const std::string& dir : dirs) DIST_RETURN_IF_ERROR(CheckOnlyOwnerWrites(dir));
  DIST_RETURN_IF_ERROR(CheckOnlyOwnerWrites(absolute));
  return CheckElfSharedObject(absolute);
}

// dlopens the file, finds its entry symbol, copies its table and activates it.
void OpenAndActivate(PluginRecord& record) {
  dlerror();
  void* handle = dlopen(record.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* text = dlerror();
    record.status = DIST_PLUGIN_LOAD_FAILED;
    record.reason = text != nullptr ? text : "dlopen failed";
  } else {
    const char* symbol = record.kind == DIST_PLUGIN_BACKEND ? DIST_BACKEND_ENTRY_SYMBOL
                                                            : DIST_RENDEZVOUS_ENTRY_SYMBOL;
    void* entry = dlsym(handle, symbol);
    if (entry == nullptr) {
      record.status = DIST_PLUGIN_BAD_ABI;
      record.reason = absl::StrCat("no entry symbol ", symbol, OtherMajorHint(handle, record.kind));
    } else if (record.kind == DIST_PLUGIN_BACKEND) {
      const dist_backend_plugin_t* table = reinterpret_cast<dist_backend_plugin_entry_fn>(entry)();
      if (table == nullptr) {
        record.status = DIST_PLUGIN_BAD_ABI;
        record.reason = absl::StrCat(symbol, "() returned NULL");
      } else {
        record.status = DIST_PLUGIN_OK;
        FillBackend(record, table);
        if (record.status == DIST_PLUGIN_OK) Activate(record);
      }
    } else {
      const dist_rendezvous_plugin_t* table =
          reinterpret_cast<dist_rendezvous_plugin_entry_fn>(entry)();
      if (table == nullptr) {
        record.status = DIST_PLUGIN_BAD_ABI;
        record.reason = absl::StrCat(symbol, "() returned NULL");
      } else {
        record.status = DIST_PLUGIN_OK;
        FillRendezvous(record, table);
        if (record.status == DIST_PLUGIN_OK) Activate(record);
      }
    }
    // The handle is kept open on purpose, even on failure: errors and
    // strings a plugin handed out must stay valid.
  }
}

void FinishSchemePointers(PluginRecord& record) {
  record.scheme_pointers.clear();
  for (const std::string& scheme : record.schemes) record.scheme_pointers.push_back(scheme.c_str());
  record.scheme_pointers.push_back(nullptr);
}

}  // namespace

bool LooksLikePath(const std::string& text) { return text.find('/') != std::string::npos; }

PluginRegistry& PluginRegistry::Get() {
  static PluginRegistry* registry = new PluginRegistry();  // never destroyed: plugins stay loaded
  return *registry;
}

std::vector<std::string> PluginRegistry::SearchPath() const {
  std::vector<std::string> dirs;
  const std::string core_dir = DirOfCore();
  if (!core_dir.empty()) dirs.push_back(absl::StrCat(core_dir, "/dist/plugins"));
  if (const char* env = std::getenv("DIST_PLUGIN_PATH")) {
    for (absl::string_view dir : absl::StrSplit(env, ':', absl::SkipEmpty())) {
      if (!absl::StartsWith(dir, "/")) continue;  // refused by SearchPathError
      const std::string absolute = Absolute(std::string(dir));
      if (std::find(dirs.begin(), dirs.end(), absolute) == dirs.end()) dirs.push_back(absolute);
    }
  }
  return dirs;
}

absl::Status SearchPathError() {
  const char* env = std::getenv("DIST_PLUGIN_PATH");
  if (env == nullptr) return absl::OkStatus();
  for (absl::string_view dir : absl::StrSplit(env, ':', absl::SkipEmpty())) {
    if (!absl::StartsWith(dir, "/")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "environment (DIST_PLUGIN_PATH): entry '", dir,
          "' is relative, and would depend on the current directory; use absolute directories"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> PluginRegistry::FindFiles(const std::string& file_prefix) const {
  std::vector<std::string> files;
  for (const std::string& dir : SearchPath()) {
    if (!IsDirectory(dir)) continue;
    DIR* handle = opendir(dir.c_str());
    if (handle == nullptr) continue;
    std::vector<std::string> names;
    while (struct dirent* entry = readdir(handle)) {
      const std::string name = entry->d_name;
      if (absl::StartsWith(name, file_prefix) && absl::EndsWith(name, ".so")) names.push_back(name);
    }
    closedir(handle);
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) files.push_back(absl::StrCat(dir, "/", name));
  }
  return files;
}

const PluginRecord* PluginRegistry::LoadFile(dist_plugin_kind_t kind, const std::string& path) {
  const std::string absolute = Absolute(path);
  for (const auto& record : records_) {
    if (record->path == absolute && record->kind == kind) return record.get();
  }
  auto record = std::make_unique<PluginRecord>();
  record->kind = kind;
  record->path = absolute;
  record->name = NameFromPath(kind, absolute);
  LogLine(DIST_LOG_DEBUG, "core", absl::StrCat("loading ", KindWord(kind), " plugin ", absolute));
  // Nothing of the file runs before it passed these checks.
  absl::Status safe = CheckBeforeLoading(path, absolute);
  if (!safe.ok()) {
    record->status = DIST_PLUGIN_LOAD_FAILED;
    record->reason = std::string(safe.message());
    record->refused = true;
  } else {
    OpenAndActivate(*record);
  }
  FinishSchemePointers(*record);
  if (record->status != DIST_PLUGIN_OK) {
    LogLine(DIST_LOG_DEBUG, "core", absl::StrCat(absolute, ": ", record->reason));
  }
  records_.push_back(std::move(record));
  return records_.back().get();
}

void PluginRegistry::ScanAll() {
  if (scanned_) return;
  scanned_ = true;
  for (dist_plugin_kind_t kind : {DIST_PLUGIN_BACKEND, DIST_PLUGIN_RENDEZVOUS}) {
    for (const std::string& file : FindFiles(FilePrefix(kind))) LoadFile(kind, file);
  }
}

std::string PluginRegistry::AvailableNames(dist_plugin_kind_t kind) const {
  // From file names alone: building an error message loads nothing.
  std::vector<std::string> names;
  for (const std::string& file : FindFiles(FilePrefix(kind))) {
    std::string name = NameFromPath(kind, file);
    names.push_back(kind == DIST_PLUGIN_BACKEND ? name : name + "://");
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

absl::StatusOr<std::string> PluginRegistry::ResolveByName(dist_plugin_kind_t kind,
                                                          const std::string& name) const {
  DIST_RETURN_IF_ERROR(SearchPathError());
  const std::vector<std::string> files = FindFiles(absl::StrCat(FilePrefix(kind), name, ".so"));
  if (!files.empty()) return files.front();  // the earliest directory wins
  const std::vector<std::string> dirs = SearchPath();
  const std::string searched = dirs.empty() ? "(no directories)" : absl::StrJoin(dirs, ":");
  if (kind == DIST_PLUGIN_BACKEND) {
    return absl::NotFoundError(absl::StrCat(
        "unknown backend '", name, "'; available: ", AvailableNames(kind), "; searched: ", searched,
        "; add its directory to DIST_PLUGIN_PATH or give the path to the .so"));
  }
  return absl::NotFoundError(absl::StrCat(
      "no rendezvous plugin handles '", name, "://'; available: ", AvailableNames(kind),
      "; searched: ", searched,
      "; use env://, tcp:// or file://, or add the plugin's directory to DIST_PLUGIN_PATH"));
}

absl::Status RecordStatus(const PluginRecord& record) {
  const char* kind = KindWord(record.kind);
  const std::string abi =
      record.abi_major == 0 ? "unknown" : absl::StrCat(record.abi_major, ".", record.abi_minor);
  switch (record.status) {
    case DIST_PLUGIN_OK:
      return absl::OkStatus();
    case DIST_PLUGIN_UNAVAILABLE:
      return absl::UnavailableError(
          absl::StrCat(kind, " '", record.name, "' is unavailable here: ", record.reason));
    case DIST_PLUGIN_LOAD_FAILED:
      if (record.refused) {  // the reason names the file and the fix
        return absl::FailedPreconditionError(
            absl::StrCat("cannot load ", kind, " plugin '", record.name, "': ", record.reason));
      }
      return absl::FailedPreconditionError(
          absl::StrCat("cannot load ", kind, " plugin '", record.name, "' from ", record.path, ": ",
                       record.reason, " (plugin ABI ", abi, ", core ABI ", CoreAbi(record.kind),
                       "); install the missing library or fix LD_LIBRARY_PATH"));
    case DIST_PLUGIN_BAD_ABI:
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot use ", kind, " plugin '", record.name, "' from ", record.path, ": ",
          record.reason, " (plugin ABI ", abi, ", core ABI ", CoreAbi(record.kind), ")"));
    case DIST_PLUGIN_INIT_FAILED:
      return absl::FailedPreconditionError(
          absl::StrCat(kind, " plugin '", record.name, "' (", record.path, "): ", record.reason));
    case DIST_PLUGIN_SHADOWED:  // only reported by listings, see shadowed_by
      break;
  }
  return absl::InternalError("unknown plugin status");
}

absl::StatusOr<const PluginRecord*> PluginRegistry::LoadBackend(const std::string& requested) {
  // "mpi" -> the MPI build matching the launcher (core/mpi_flavor.h).
  absl::StatusOr<std::string> flavored = ResolveMpiFlavor(requested, "backend");
  if (!flavored.ok()) return flavored.status();
  const std::string& name_or_path = *flavored;
  absl::MutexLock lock(&mu_);
  if (name_or_path.empty()) return absl::InvalidArgumentError("backend name is empty");
  std::string file = name_or_path;
  if (LooksLikePath(name_or_path)) {
    struct stat st;
    if (stat(name_or_path.c_str(), &st) != 0) {
      return absl::NotFoundError(
          absl::StrCat("backend plugin file ", name_or_path, " does not exist; check the path"));
    }
  } else {
    absl::StatusOr<std::string> found = ResolveByName(DIST_PLUGIN_BACKEND, name_or_path);
    if (!found.ok()) return found.status();
    file = *std::move(found);
  }
  const PluginRecord* record = LoadFile(DIST_PLUGIN_BACKEND, file);
  DIST_RETURN_IF_ERROR(RecordStatus(*record));
  return record;
}

absl::StatusOr<const PluginRecord*> PluginRegistry::LoadRendezvous(const std::string& requested) {
  absl::StatusOr<std::string> flavored = ResolveMpiFlavor(requested, "init method");
  if (!flavored.ok()) return flavored.status();
  const std::string& scheme = *flavored;
  absl::MutexLock lock(&mu_);
  if (scheme.empty() || LooksLikePath(scheme)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous scheme '", scheme, "' is not a name; use env://, tcp:// or file://"));
  }
  absl::StatusOr<std::string> file = ResolveByName(DIST_PLUGIN_RENDEZVOUS, scheme);
  if (!file.ok()) return file.status();
  const PluginRecord* record = LoadFile(DIST_PLUGIN_RENDEZVOUS, *file);
  DIST_RETURN_IF_ERROR(RecordStatus(*record));
  if (std::find(record->schemes.begin(), record->schemes.end(), scheme) == record->schemes.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rendezvous plugin ", record->path, " is named for '", scheme, "://' but handles ",
        record->schemes.empty() ? "no scheme" : absl::StrJoin(record->schemes, ", "),
        "; rename the file libdist-rendezvous-<scheme>.so after the scheme it handles"));
  }
  return record;
}

std::vector<const PluginRecord*> PluginRegistry::ListAll() {
  absl::MutexLock lock(&mu_);
  ScanAll();
  // In search order; a later plugin of the same kind and name is shadowed.
  std::vector<const PluginRecord*> out;
  for (dist_plugin_kind_t kind : {DIST_PLUGIN_BACKEND, DIST_PLUGIN_RENDEZVOUS}) {
    for (const std::string& file : FindFiles(FilePrefix(kind))) {
      PluginRecord* later = const_cast<PluginRecord*>(LoadFile(kind, file));
      const bool usable =
          later->status == DIST_PLUGIN_OK || later->status == DIST_PLUGIN_UNAVAILABLE;
      for (const PluginRecord* earlier : out) {
        if (usable && earlier->kind == kind && earlier->name == later->name &&
            earlier->shadowed_by.empty() &&
            (earlier->status == DIST_PLUGIN_OK || earlier->status == DIST_PLUGIN_UNAVAILABLE)) {
          later->shadowed_by = earlier->path;
          break;
        }
      }
      if (std::find(out.begin(), out.end(), later) == out.end()) out.push_back(later);
    }
  }
  // Plugins loaded by explicit path, outside the search path, come last.
  for (const auto& record : records_) {
    if (std::find(out.begin(), out.end(), record.get()) == out.end()) out.push_back(record.get());
  }
  return out;
}

}  // namespace dist

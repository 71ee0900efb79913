#include "core/mpi_flavor.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cstring>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dist {
namespace {

struct Flavor {
  const char* name;            // plugin name and URL scheme
  const char* implementation;  // for messages
  const char* library;         // soname the plugin links
  const char* launcher;        // how to start a job with it
  const char* marker;          // a data symbol only this implementation's library defines
};

constexpr Flavor kOpenMpi = {"openmpi", "Open MPI", "libmpi.so.40", "mpirun -np N",
                             "ompi_mpi_comm_world"};
constexpr Flavor kMpich = {"mpich", "MPICH", "libmpich.so.12", "mpiexec.mpich -n N",
                           "MPII_Version_string"};

// The first of `names` that is set, or nullptr.
const char* FirstSet(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (getenv(name) != nullptr) return name;
  }
  return nullptr;
}

// The implementation whose launcher started this process, and the variable
// that says so. Open MPI's mpirun also sets PMIX_*, so OMPI_* is checked
// first; PMIX_* alone (srun --mpi=pmix) could be either and decides nothing.
std::optional<Flavor> LauncherFlavor(const char** variable) {
  if ((*variable = FirstSet({"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}))) return kOpenMpi;
  if ((*variable = FirstSet({"PMI_RANK", "PMI_SIZE", "PMI_FD"}))) return kMpich;
  return std::nullopt;
}

// Whether the implementation's library is in the global symbol scope: the
// program links it, or loaded it RTLD_GLOBAL (Open MPI's plugins do so when
// they initialize MPI). Only there does it matter: its MPI_* would answer
// the other build's lookups. A plugin loaded RTLD_LOCAL just to be listed
// (distinfo) is not seen.
bool Loaded(const Flavor& flavor) { return dlsym(RTLD_DEFAULT, flavor.marker) != nullptr; }

}  // namespace

bool IsMpiName(const std::string& name) {
  return name == "mpi" || name == kOpenMpi.name || name == kMpich.name;
}

absl::StatusOr<std::string> ResolveMpiFlavor(const std::string& name, const char* what) {
  if (!IsMpiName(name)) return name;
  const char* variable = nullptr;
  const std::optional<Flavor> launcher = LauncherFlavor(&variable);
  const bool openmpi_loaded = Loaded(kOpenMpi);
  const bool mpich_loaded = Loaded(kMpich);
  std::optional<Flavor> loaded;
  if (openmpi_loaded != mpich_loaded) loaded = openmpi_loaded ? kOpenMpi : kMpich;

  if (name == "mpi") {
    if (launcher && loaded && loaded->name != launcher->name) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " 'mpi': this program has ", loaded->implementation, "'s ", loaded->library,
          " loaded but was started by ", launcher->implementation, "'s launcher (", variable,
          " is set); the two are not binary compatible: start it with ", loaded->implementation,
          "'s `", loaded->launcher, "`, or build it against ", launcher->implementation));
    }
    if (launcher) return std::string(launcher->name);
    if (loaded) return std::string(loaded->name);
    return std::string(kOpenMpi.name);
  }
  const Flavor wanted = name == kOpenMpi.name ? kOpenMpi : kMpich;
  // "init method 'mpich://'", "backend 'mpich'".
  const std::string shown = std::strcmp(what, "backend") == 0 ? name : name + "://";
  const Flavor other = name == kOpenMpi.name ? kMpich : kOpenMpi;
  if (launcher && launcher->name != wanted.name) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", shown, "' is built for ", wanted.implementation,
                     " but this process was "
                     "started by ",
                     launcher->implementation, "'s launcher (", variable,
                     " is set); the two "
                     "are not binary compatible: use '",
                     other.name,
                     "' or 'mpi' (picks the launcher's), or "
                     "start the program with ",
                     wanted.implementation, "'s `", wanted.launcher, "`"));
  }
  if (loaded && loaded->name != wanted.name) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " '", shown, "' is built for ", wanted.implementation,
                     " but this process already "
                     "has ",
                     loaded->implementation, "'s ", loaded->library,
                     " loaded; the two are not binary "
                     "compatible: use '",
                     other.name, "' or 'mpi', or link the program with ", wanted.implementation));
  }
  return name;
}

}  // namespace dist

#include "probe.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime.h"
#include "support/mpi_flavor.h"

namespace dist_mpi {
namespace {

constexpr uint32_t kAll8 = 0xffu;

// Whether `name` is an executable in PATH (or /usr/bin).
bool InPath(const char* name) {
  const char* path = std::getenv("PATH");
  std::string dirs = absl::StrCat(path ? path : "", ":/usr/bin");
  for (absl::string_view dir : absl::StrSplit(dirs, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

absl::Status ProbeLauncher() {
  // Does not initialize MPI (a singleton init forks an orted). Under a
  // launcher, or with MPI already up, the backend can run; alone, it runs as
  // an MPI singleton of world size 1, which needs Open MPI's orted.
  if (!Runtime::ForeignMpi().empty()) {
    return absl::UnavailableError(
        absl::StrCat(dist_mpi_flavor::kName, ": ", Runtime::ForeignMpi()));
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  const char* helper = dist_mpi_flavor::kSingletonHelper;  // MPICH needs none
  if (initialized || Runtime::StartedByLauncher() || helper == nullptr || InPath(helper)) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      "mpi: not started by an MPI launcher and Open MPI's orted (needed to run as a singleton) "
      "is not in PATH; launch with `mpirun -np N <program>`");
}

void FillCapabilities(dist_backend_capabilities_t& caps) {
  Runtime& runtime = Runtime::Get();
  caps.device_types = 1u << DIST_DEVICE_CPU;
  if (runtime.cuda_aware()) caps.device_types |= 1u << DIST_DEVICE_CUDA;
  caps.dtypes = kAll8;
  caps.collectives = (1u << DIST_COLLECTIVE_COUNT) - 1;
  caps.all_reduce_ops = kAll8;
  caps.reduce_ops = kAll8;
  caps.reduce_scatter_ops = kAll8;
  // MPI_Comm_split orders the new ranks by key.
  caps.flags = DIST_CAP_SUBGROUPS | DIST_CAP_NEEDS_LAUNCHER | DIST_CAP_SPLIT_ORDERED;
  if (runtime.thread_multiple()) caps.flags |= DIST_CAP_THREAD_MULTIPLE;
  if (runtime.cuda_aware()) caps.flags |= DIST_CAP_CUDA_AWARE;
  caps.notes = runtime.thread_notes();
}

}  // namespace dist_mpi

// Which build of the MPI plugins a process uses. The MPI backend and the
// mpi:// rendezvous are built once per implementation (Open MPI, MPICH),
// which are not binary compatible; "mpi" names whichever matches the
// process:
//   1. the launcher's environment: OMPI_COMM_WORLD_* (Open MPI's mpirun)
//      -> openmpi; PMI_RANK/PMI_SIZE/PMI_FD without them (MPICH's Hydra
//      mpiexec, or srun --mpi=pmi2) -> mpich;
//   2. else the MPI library already in the process's global symbol scope (a
//      host linked with libmpi.so.40 or libmpich.so.12);
//   3. else openmpi, Debian's default MPI.
// "openmpi" and "mpich" pick one explicitly; either under the other's
// launcher, or with the other's library loaded, is an error naming both, and
// so is "mpi" when the launcher and the loaded library disagree.
#ifndef DIST_CORE_MPI_FLAVOR_H_
#define DIST_CORE_MPI_FLAVOR_H_

#include <string>

#include "absl/status/statusor.h"

namespace dist {

// Whether `name` is a backend name or URL scheme of the MPI plugins
// ("mpi", "openmpi", "mpich").
bool IsMpiName(const std::string& name);

// The plugin name (or scheme) to load for `name`: "mpi" becomes "openmpi"
// or "mpich" by the rule above; "openmpi"/"mpich" stay as they are once
// checked against the launcher and the loaded library; other names are
// returned unchanged. `what` ("backend", "init method") is for messages.
absl::StatusOr<std::string> ResolveMpiFlavor(const std::string& name, const char* what);

}  // namespace dist

#endif  // DIST_CORE_MPI_FLAVOR_H_

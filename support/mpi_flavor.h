// Which MPI implementation a build of the MPI plugins is for. The same
// sources build once against Open MPI and once against MPICH (see
// plugins/backends/mpi/BUILD);
// the answer comes from the mpi.h they were compiled with, so a plugin's
// name can never disagree with the library it links. For the MPI backend
// and the mpi:// rendezvous; the including target brings mpi.h.
#ifndef DIST_SUPPORT_MPI_FLAVOR_H_
#define DIST_SUPPORT_MPI_FLAVOR_H_

#include <mpi.h>

namespace dist_mpi_flavor {

#if defined(OPEN_MPI) && OPEN_MPI
inline constexpr char kName[] = "openmpi";  // plugin name and URL scheme
inline constexpr char kImplementation[] = "Open MPI";
inline constexpr char kLibrary[] = "libmpi.so.40";
inline constexpr char kLauncher[] = "mpirun -np ";  // + N <program>
// Open MPI dlopens its MCA components, which look for libmpi's symbols in
// the global scope; the core loads plugins RTLD_LOCAL.
inline constexpr bool kNeedsGlobalSymbols = true;
// A process no launcher started runs as a singleton, which forks this.
inline constexpr const char* kSingletonHelper = "orted";
#elif defined(MPICH)
inline constexpr char kName[] = "mpich";
inline constexpr char kImplementation[] = "MPICH";
inline constexpr char kLibrary[] = "libmpich.so.12";
inline constexpr char kLauncher[] = "mpiexec.mpich -n ";
// MPICH loads nothing that needs libmpich's symbols globally; keeping it
// local also keeps it from answering an Open MPI plugin's lookups.
inline constexpr bool kNeedsGlobalSymbols = false;
inline constexpr const char* kSingletonHelper = nullptr;  // MPICH needs none
#else
#error "mpi.h is neither Open MPI's nor MPICH's"
#endif

}  // namespace dist_mpi_flavor

#endif  // DIST_SUPPORT_MPI_FLAVOR_H_

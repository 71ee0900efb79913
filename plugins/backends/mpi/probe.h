// Whether the MPI backend can run in this process, and what it offers.
#ifndef DIST_PLUGINS_BACKENDS_MPI_PROBE_H_
#define DIST_PLUGINS_BACKENDS_MPI_PROBE_H_

#include "absl/status/status.h"
#include "dist/backend_plugin.h"

namespace dist_mpi {

// OK under a launcher, with MPI up, or with orted in PATH (singleton);
// UNAVAILABLE naming the fix otherwise. Does not initialize MPI.
absl::Status ProbeLauncher();

// Fills a zeroed capabilities struct (thread level and CUDA awareness of
// the MPI library).
void FillCapabilities(dist_backend_capabilities_t& caps);

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_PROBE_H_

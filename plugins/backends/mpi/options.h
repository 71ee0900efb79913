// The mpi.* options of a communicator's config ("mpi.abort_process=1").
#ifndef DIST_PLUGINS_BACKENDS_MPI_OPTIONS_H_
#define DIST_PLUGINS_BACKENDS_MPI_OPTIONS_H_

#include "absl/status/statusor.h"
#include "comm.h"
#include "dist/backend_plugin.h"

namespace dist_mpi {

// Reads the mpi.* options; an unknown one or a non-boolean value is an error.
absl::StatusOr<CommOptions> ParseOptions(const dist_comm_config_t& config);

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_OPTIONS_H_

// Converting Open MPI return codes into absl::Status.
#ifndef DIST_PLUGINS_BACKENDS_MPI_MPI_STATUS_H_
#define DIST_PLUGINS_BACKENDS_MPI_MPI_STATUS_H_

#include <mpi.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dist_mpi {

// OK for MPI_SUCCESS; otherwise an error naming the MPI call that failed and
// MPI's own text for the code.
inline absl::Status MpiStatus(int rc, absl::string_view call) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  return absl::UnavailableError(
      absl::StrCat("mpi: ", call, " failed: ", absl::string_view(text, length), " (MPI error ", rc,
                   "); check the other ranks' logs and mpirun's output"));
}

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_MPI_STATUS_H_

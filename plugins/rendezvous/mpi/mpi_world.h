// What the mpi:// rendezvous needs from MPI: MPI initialized (by the host,
// or here, the way the MPI backend would do it), this process's place in
// MPI_COMM_WORLD, and a broadcast from rank 0 bounded by a deadline.
#ifndef DIST_PLUGINS_RENDEZVOUS_MPI_MPI_WORLD_H_
#define DIST_PLUGINS_RENDEZVOUS_MPI_MPI_WORLD_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dist::rendezvous::mpi {

// Initializes MPI unless it is up already, asking for MPI_THREAD_MULTIPLE,
// with MPI_ERRORS_RETURN on MPI_COMM_WORLD, finalized at exit; the MPI
// backend then finds MPI up and leaves both to this plugin. Idempotent.
absl::Status EnsureMpi();

struct WorldPlace {
  int rank = 0;
  int size = 0;
};
absl::StatusOr<WorldPlace> World();

// Broadcasts `*text` (at most kMaxBroadcast bytes) from rank 0 of
// MPI_COMM_WORLD: a non-blocking broadcast polled until `deadline`, since
// MPI cannot cancel a collective that a rank never joins.
inline constexpr size_t kMaxBroadcast = 1024;
absl::Status Broadcast(std::string* text, absl::Time deadline);

}  // namespace dist::rendezvous::mpi

#endif  // DIST_PLUGINS_RENDEZVOUS_MPI_MPI_WORLD_H_

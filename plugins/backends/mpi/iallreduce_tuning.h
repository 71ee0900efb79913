// Chooses libnbc's MPI_Iallreduce algorithm per call.
//
// Open MPI 4.1's libnbc picks a binomial tree for every message when a
// communicator has fewer than 4 ranks (or the call is in place), which moves
// the whole vector log2(p) times and reaches about half of the blocking
// MPI_Allreduce's bus bandwidth. From 1 KiB on small communicators the ring
// schedule is the faster one (bandwidth-optimal), so the plugin selects it
// through the MPI tools interface (control variable
// coll_libnbc_iallreduce_algorithm) just around its own MPI_Iallreduce
// calls. The choice depends only on the message size and communicator size,
// which every rank shares, so all ranks build matching schedules. A user who
// sets the variable (OMPI_MCA_coll_libnbc_iallreduce_algorithm) is obeyed.
#ifndef DIST_PLUGINS_BACKENDS_MPI_IALLREDUCE_TUNING_H_
#define DIST_PLUGINS_BACKENDS_MPI_IALLREDUCE_TUNING_H_

#include <mpi.h>

#include <cstddef>

#include "absl/synchronization/mutex.h"

namespace dist_mpi {

class IallreduceTuning {
 public:
  static IallreduceTuning& Get();

  void Init();      // after MPI_Init
  void Finalize();  // before MPI_Finalize

  // Issues MPI_Iallreduce with the algorithm suited to `bytes`.
  int Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                 MPI_Comm comm, int comm_size, size_t bytes, MPI_Request* request);

 private:
  IallreduceTuning() = default;
  int Choose(size_t bytes, int comm_size) const;

  absl::Mutex mu_;  // the variable is process-wide: write + issue together
  bool enabled_ = false;
  MPI_T_cvar_handle handle_ = MPI_T_CVAR_HANDLE_NULL;
  int current_ = 0;
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_IALLREDUCE_TUNING_H_

// Chooses libnbc's algorithm per non-blocking collective call.
//
// Open MPI 4.1's libnbc picks schedules that fall far behind the blocking
// collectives on small communicators:
//  * MPI_Iallreduce: a binomial tree for every message when a communicator
//    has fewer than 4 ranks, which moves the whole vector log2(p) times and
//    reaches about half of MPI_Allreduce's bus bandwidth. From 1 KiB the ring
//    schedule (bandwidth-optimal) is faster.
//  * MPI_Ireduce: the default (a segmented chain for large messages) reached
//    a quarter to a third of MPI_Reduce's bandwidth at 2-4 ranks; the
//    binomial tree matches MPI_Reduce (time ratio 1.01-1.3 from 4 KiB to
//    4 MiB, measured with distbench --baseline at 2, 3 and 4 ranks).
// The plugin sets the control variables (coll_libnbc_iallreduce_algorithm,
// coll_libnbc_ireduce_algorithm) through the MPI tools interface just
// around its own calls and restores the default after, so the host's own
// calls are unaffected. The choice depends only on the message size and
// communicator size, which every rank shares, so all ranks build matching
// schedules. A user who sets a variable (OMPI_MCA_coll_libnbc_*) is obeyed.
#ifndef DIST_PLUGINS_BACKENDS_MPI_NBC_TUNING_H_
#define DIST_PLUGINS_BACKENDS_MPI_NBC_TUNING_H_

#include <mpi.h>

#include <atomic>
#include <cstddef>

#include "absl/base/call_once.h"
#include "absl/synchronization/mutex.h"

namespace dist_mpi {

// One libnbc algorithm control variable.
class NbcAlgorithm {
 public:
  explicit NbcAlgorithm(const char* cvar_name) : cvar_name_(cvar_name) {}

  void Init();      // after MPI_T_init_thread
  void Finalize();  // before MPI_T_finalize

  // Runs `issue()` (which starts the collective) with the variable set to
  // `wanted`, then restores libnbc's default. Without the tools interface,
  // or when the user set the variable, just runs `issue()`.
  template <typename Issue>
  int With(int wanted, Issue issue) {
    if (!enabled_) return issue();
    absl::MutexLock lock(&mu_);  // the variable is process-wide: write + issue together
    if (wanted != current_ && MPI_T_cvar_write(handle_, &wanted) == MPI_SUCCESS) current_ = wanted;
    const int rc = issue();
    if (current_ != kDefault && MPI_T_cvar_write(handle_, &kDefault) == MPI_SUCCESS) {
      current_ = kDefault;
    }
    return rc;
  }

  static constexpr int kDefault = 0;  // libnbc decides

 private:
  const char* cvar_name_;
  absl::Mutex mu_;
  bool enabled_ = false;
  MPI_T_cvar_handle handle_ = MPI_T_CVAR_HANDLE_NULL;
  int current_ = kDefault;
};

class NbcTuning {
 public:
  static NbcTuning& Get();

  void Init();      // after MPI_Init (the tools interface starts on first use)
  void Finalize();  // before MPI_Finalize

  // MPI_Iallreduce / MPI_Ireduce with the algorithm suited to `bytes`.
  int Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                 MPI_Comm comm, int comm_size, size_t bytes, MPI_Request* request);
  int Ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root,
              MPI_Comm comm, int comm_size, size_t bytes, MPI_Request* request);

 private:
  NbcTuning() = default;

  void EnsureTools();

  absl::once_flag tools_once_;
  std::atomic<bool> tools_started_{false};
  bool tools_ready_ = false;
  NbcAlgorithm iallreduce_{"coll_libnbc_iallreduce_algorithm"};
  NbcAlgorithm ireduce_{"coll_libnbc_ireduce_algorithm"};
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_NBC_TUNING_H_

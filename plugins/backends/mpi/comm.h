// One communicator: an MPI communicator of its own (a dup of
// MPI_COMM_WORLD or a split of a parent), the queue of its pending
// operations, and their completion in issue order.
#ifndef DIST_PLUGINS_BACKENDS_MPI_COMM_H_
#define DIST_PLUGINS_BACKENDS_MPI_COMM_H_

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "p2p_schedule.h"

namespace dist_mpi {

// One started operation. Shared by the communicator's list of started
// ops and the runtime's handle (MpiInFlight), so either may go first.
struct PendingOp {
  dist_collective_t kind = DIST_COLL_BARRIER;
  uint64_t collective_seq = 0;  // 1, 2, ... per communicator; 0 for send/recv
  int peer = -1;                // send/recv
  int64_t tag = 0;
  uint64_t count = 0;
  dist_dtype_t dtype = DIST_FLOAT32;
  absl::Time issued;
  absl::Duration timeout;

  // Makes the non-blocking MPI call (after any copy it needs), in issue
  // order. The SDK runtime starts an op only after earlier ones in flight
  // that share its buffers (dist/cpp/in_flight.hpp).
  std::function<int(MPI_Request*)> start;
  // Instead of `start`: the op is the plugin's own schedule of
  // point-to-point messages, started and tested in place of one request.
  std::unique_ptr<P2pSchedule> schedule;
  bool schedule_done = false;
  int schedule_rc = MPI_SUCCESS;  // the first failure of schedule->Test

  bool started = false;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Status mpi_status{};
  // Runs once MPI reports completion, before the op counts as done (divide
  // for avg, copy out of scratch, check a recv's size).
  std::function<absl::Status(const MPI_Status&)> on_complete;
  std::vector<unsigned char> scratch;
  // Whatever `start` points into and MPI reads until completion (the
  // count arrays of a variable-count collective).
  std::shared_ptr<const void> keep_alive;
  // The runtime's finish callback (dist::Transport::Finish): called once
  // with the status when the op completes, outside the communicator's lock.
  std::function<void(const absl::Status&)> on_done;

  std::atomic<bool> done{false};
  absl::Status status;  // written before done is set

  absl::Mutex diagnosis_mu;
  bool diagnosed ABSL_GUARDED_BY(diagnosis_mu) = false;
  std::string diagnosis ABSL_GUARDED_BY(diagnosis_mu);
};

struct CommOptions {
  // comm_abort also calls MPI_Abort (kills the whole job): the last resort
  // for when pending collectives must not touch freed buffers.
  bool abort_process = false;
};

class Comm : public std::enable_shared_from_this<Comm> {
 public:
  // comm_create: checks the launch, initializes MPI, checks that the init
  // method's rank and size agree with MPI_COMM_WORLD, and dups it.
  static absl::StatusOr<std::shared_ptr<Comm>> CreateWorld(const dist_comm_config_t& config,
                                                           const CommOptions& options);

  // comm_split, on every rank of this communicator; null on non-members.
  absl::StatusOr<std::shared_ptr<Comm>> Split(const int32_t* ranks, size_t num_ranks,
                                              const dist_comm_config_t& config);

  Comm(MPI_Comm comm, MPI_Comm p2p_comm, int rank, int size, const dist_comm_config_t& config,
       const CommOptions& options);

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm mpi_comm() const { return comm_; }
  // For the plugin's own point-to-point schedules (P2pSchedule): a
  // duplicate of mpi_comm(), so they never match user send/recv.
  MPI_Comm p2p_comm() const { return p2p_comm_; }
  absl::Duration timeout() const { return timeout_; }

  // Fills the op's bookkeeping and starts it now; a failure to start is
  // returned (nothing was issued then).
  absl::Status Issue(const std::shared_ptr<PendingOp>& op);
  // Sets the op's finish callback; calls it at once (outside the lock) when
  // the op completed already.
  void SetOnDone(const std::shared_ptr<PendingOp>& op,
                 std::function<void(const absl::Status&)> on_done);

  // Polls MPI until `op` (and everything started before it) completes, the
  // communicator is aborted, or `until` passes. Returns whether it is done.
  bool Drive(PendingOp& op, absl::Time until);
  // Drive to `op`'s end, within `timeout`: its status, else TimeoutError.
  absl::Status Await(PendingOp& op, absl::Duration timeout);
  // The error for a wait of `waited` that ended before `op`: OverdueError
  // once the op is past its timeout.
  absl::Status TimeoutError(PendingOp& op, absl::Duration waited);
  // The error for an op past its timeout that MPI still holds, naming the
  // ranks that did not reach it.
  absl::Status OverdueError(PendingOp& op);

  // From the progress thread: polls once unless someone is waiting already.
  enum class Activity { kIdle, kAttended, kUnattended };
  Activity BackgroundProgress();

  // Ends every started op (MPI keeps the requests it cannot cancel; their
  // finish callbacks are dropped: the runtime has ended their works).
  void Abort(const std::string& reason);
  // Waits (up to the timeout) for pending work, then frees the MPI
  // communicator.
  void Destroy();

  size_t pending_ops() const { return pending_count_.load(std::memory_order_relaxed); }
  // Over every communicator of the process, destroyed ones included.
  static size_t TotalPendingOps();

  // "all_reduce #3 (float32 x 1024) on group 'default' (rank 0 of 2)"
  std::string Describe(const PendingOp& op) const;

 private:
  using Finished = std::vector<std::pair<std::function<void(const absl::Status&)>, absl::Status>>;
  // Completes what MPI finished, oldest first; the finish callbacks to run
  // once mu_ is released go to *finished.
  void ProgressLocked(Finished* finished) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One ProgressLocked, and its callbacks after the lock.
  void Progress();
  int StartLocked(PendingOp& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One MPI_Test of a started op (or one advance of its schedule).
  static int TestStarted(PendingOp& op, int* flag);
  // Advances the schedules of started ops behind the oldest one.
  void AdvanceSchedulesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Complete(PendingOp& op, absl::Status status, Finished* finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AbortedError() const;
  std::string Diagnose(PendingOp& op);

  MPI_Comm comm_;
  MPI_Comm p2p_comm_;
  const int rank_;
  const int size_;
  const std::string name_;
  const absl::Duration timeout_;
  dist_store_t* const store_;  // borrowed until Destroy returns; may be null
  const CommOptions options_;

  mutable absl::Mutex mu_;
  // Started ops, oldest first.
  std::deque<std::shared_ptr<PendingOp>> pending_ ABSL_GUARDED_BY(mu_);
  // Aborted while MPI still owned them; never completed by the plugin.
  std::vector<std::shared_ptr<PendingOp>> abandoned_ ABSL_GUARDED_BY(mu_);
  uint64_t next_collective_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::string abort_reason_;  // written once under mu_, before aborted_
  bool freed_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> aborted_{false};
  std::atomic<size_t> pending_count_{0};
  std::atomic<int> waiters_{0};
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_COMM_H_

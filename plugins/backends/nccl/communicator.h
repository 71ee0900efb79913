// One rank's NCCL communicator: the ncclComm_t (non-blocking), its own
// CUDA stream, the list of pending work, and the watchdog that aborts the
// communicator when NCCL reports an error or an operation outlives its
// timeout, so that no rank hangs.
//
// Locking: nccl_mu_ guards comm_ and every NCCL call on it (issuing ops,
// split, finalize, abort); issuers hold it only while NCCL enqueues, and
// their polling stops as soon as aborting_ is set, so Abort gets it quickly.
// pending_mu_ guards the pending list; state_mu_ the abort reason.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_COMMUNICATOR_H_
#define DIST_PLUGINS_BACKENDS_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "plugins/backends/nccl/op_validation.h"
#include "plugins/backends/nccl/watchdog.h"
#include "plugins/backends/nccl/work_state.h"

namespace dist_nccl {

struct CommSettings {
  int32_t rank = 0;
  int32_t world_size = 1;
  int device = 0;
  std::string group = "default";
  absl::Duration timeout = absl::Minutes(10);
  // The communicator's store (valid until comm_destroy returns), for ranks
  // to compare notes when an operation fails; may be NULL.
  dist_store_t* store = nullptr;
};

class Communicator {
 public:
  // Takes ownership of an initialized `comm` (aborting it on failure) and
  // starts the watchdog.
  static absl::StatusOr<std::shared_ptr<Communicator>> Adopt(ncclComm_t comm,
                                                             CommSettings settings);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Validates and enqueues one operation; returns its work.
  absl::StatusOr<std::shared_ptr<WorkState>> Issue(dist_collective_t op,
                                                   const dist_op_args_t& args);

  // The same for a variable-count collective (the table's run_v: `kind` is
  // all_to_all, all_gather or reduce_scatter, `counts` its blocks); the
  // work's deadline is `timeout` from now.
  absl::StatusOr<std::shared_ptr<WorkState>> IssueVariable(dist_collective_t kind,
                                                           const dist_op_args_t& args,
                                                           const dist_op_counts_t& counts,
                                                           absl::Duration timeout);

  // ncclCommSplit: members (config.rank >= 0) get the new communicator,
  // non-members NULL. Called on every rank of this communicator.
  absl::StatusOr<std::shared_ptr<Communicator>> Split(const dist_comm_config_t& config);

  // comm_abort: tells the other ranks (through the store) that this rank
  // gave up and why, then aborts.
  void AbortByCaller(const std::string& reason);

  // Fails all pending and future work and calls ncclCommAbort. `culprit`,
  // when given, gets `reason` itself (e.g. its timeout); the rest get
  // ABORTED carrying the reason. Idempotent, thread-safe.
  void Abort(const absl::Status& reason, const std::shared_ptr<WorkState>& culprit = nullptr);

  // One watchdog round: ncclCommGetAsyncError and pending deadlines; aborts
  // on either. Also called by waiters, so a wait notices failures at once.
  void Check();

  // For WorkState::Poll: OK when NCCL reports no asynchronous error; when it
  // does, aborts and returns the abort status (also once aborted); nullopt
  // when it cannot tell now (another thread holds the NCCL lock).
  std::optional<absl::Status> Health();

  // `work`'s result once it is done, judged with Health(); nullopt before.
  std::optional<absl::Status> Poll(WorkState& work) {
    return work.Poll([this] { return Health(); });
  }

  // comm_destroy: waits for pending work (up to the timeout), stops the
  // watchdog, then finalizes and destroys the communicator (aborts it when
  // that does not finish in time).
  void Shutdown();

  const CommSettings& settings() const { return settings_; }
  // "rank 1 of group 'default' (cuda:1)", for messages.
  std::string Where() const;

 private:
  Communicator(ncclComm_t comm, CommSettings settings, cudaStream_t stream, float* scratch,
               cudaEvent_t order_event);

  // One operation ready for NCCL: what Launch or LaunchVariable needs.
  struct Launchable {
    dist_collective_t kind;
    const dist_op_args_t& args;
    const VariableBlocks* blocks;  // variable-count collectives only
    ncclDataType_t dtype;
    size_t elem;  // bytes per element of dtype
    ncclRedOp_t redop;
  };

  absl::Status AbortStatus() ABSL_LOCKS_EXCLUDED(state_mu_);
  // Enqueues `op` on `user_stream` (the own stream, ordered after the
  // default stream, when NULL), waits for NCCL to take it (up to
  // `timeout`), and returns its work, pending until `timeout` from now.
  // `what` names the operation and this rank, for errors.
  absl::StatusOr<std::shared_ptr<WorkState>> Enqueue(const Launchable& op, void* user_stream,
                                                     absl::Duration timeout,
                                                     const std::string& what)
      ABSL_LOCKS_EXCLUDED(nccl_mu_);
  // Enqueues `op` with NCCL; nccl_mu_ held.
  ncclResult_t Launch(const Launchable& op, cudaStream_t stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(nccl_mu_);
  ncclResult_t LaunchVariable(const Launchable& op, cudaStream_t stream)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(nccl_mu_);
  // Makes the own stream wait for the legacy default stream, so that data
  // the caller produced there before the call is complete.
  absl::Status OrderAfterDefaultStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(nccl_mu_);
  // Drops finished work from pending_ (polling it without the lock held,
  // since a health check may abort, which takes the lock).
  void ReapFinished() ABSL_LOCKS_EXCLUDED(pending_mu_);
  // Publishes this rank's failure `report` and, with `name_silent`, waits a
  // short grace period for the other ranks' reports; returns the text that
  // names the group's first failure and the ranks that sent none ("" when
  // there is nothing to add).
  std::string CompareNotes(const std::string& report, bool name_silent);
  // ncclCommGetAsyncError as a status; nullopt when nccl_mu_ is busy.
  std::optional<absl::Status> AsyncError() ABSL_LOCKS_EXCLUDED(nccl_mu_);

  const CommSettings settings_;
  const cudaStream_t stream_;      // the communicator's own stream
  float* const scratch_;           // one float on the device, for barrier
  const cudaEvent_t order_event_;  // see OrderAfterDefaultStream

  absl::Mutex nccl_mu_ ABSL_ACQUIRED_BEFORE(pending_mu_);
  ncclComm_t comm_ ABSL_GUARDED_BY(nccl_mu_);

  absl::Mutex pending_mu_;
  std::vector<std::shared_ptr<WorkState>> pending_ ABSL_GUARDED_BY(pending_mu_);

  absl::Mutex state_mu_;
  std::optional<absl::Status> abort_status_ ABSL_GUARDED_BY(state_mu_);
  std::atomic<bool> aborting_{false};
  std::atomic<bool> closed_{false};
  std::atomic<bool> comparing_notes_{false};  // one failure report per communicator

  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_COMMUNICATOR_H_

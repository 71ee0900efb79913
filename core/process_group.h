// A process group: one communicator per backend of the device map, over one
// shared store, plus the bookkeeping for subgroups.
#ifndef DIST_CORE_PROCESS_GROUP_H_
#define DIST_CORE_PROCESS_GROUP_H_

#include <array>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/config.h"
#include "core/fork_guard.h"
#include "core/group_tracing.h"
#include "core/host_hierarchy.h"
#include "core/plugin_loader.h"
#include "core/survival.h"
#include "dist/backend_plugin.h"
#include "dist/dist.h"

namespace dist {

// Owns the store the rendezvous returned; shared by a group and its
// subgroups so that the store outlives all of them.
// After an operation of any group on it failed (MarkFailed), the store is
// handed back with release_failed, so that shutdown takes a small bound
// instead of another timeout (a rank-0 TCP store stops waiting for ranks
// that may be stopped or hung).
class StoreOwner {
 public:
  explicit StoreOwner(dist_store_t* store) : store_(store) {}
  ~StoreOwner();
  StoreOwner(const StoreOwner&) = delete;
  StoreOwner& operator=(const StoreOwner&) = delete;
  const dist_store_t* get() const { return store_; }
  void MarkFailed(const std::string& reason);
  // The job went on after the failure (a shrink or grow succeeded): the
  // store is handed back as usual again, so that a survivor that ends
  // first does not report the job failed to a store the others still use.
  void ClearFailure();

 private:
  dist_store_t* store_;
  absl::Mutex mu_;
  std::string failure_ ABSL_GUARDED_BY(mu_);  // the first one
};

// One backend's communicator within a group.
struct BackendComm {
  const PluginRecord* plugin = nullptr;
  dist_backend_comm_t* comm = nullptr;  // NULL on non-members
  dist_store_t* store = nullptr;        // owned prefixed namespace
};

class ProcessGroup {
 public:
  friend class HostHierarchy;  // aborts its subgroups' communicators

  // dist_init.
  static absl::StatusOr<std::unique_ptr<ProcessGroup>> Create(const dist_init_options_t* options);
  ~ProcessGroup();

  // dist_new_group: collective over this group.
  absl::StatusOr<std::unique_ptr<ProcessGroup>> NewGroup(std::vector<int32_t> ranks);

  // dist_split_group: collective over this group. nullptr (and OK) for a
  // negative colour.
  absl::StatusOr<std::unique_ptr<ProcessGroup>> Split(int32_t color, int32_t key);

  // dist_all_to_all_v, dist_all_gather_v, dist_reduce_scatter_v
  // (core/variable_collectives.cc): blocking, host buffers. Displacements
  // may be NULL (packed in rank order). `op` names the call in errors.
  absl::Status AllToAllV(const dist_buffer_t& send, const uint64_t* send_counts,
                         const uint64_t* send_displs, const dist_buffer_t& recv,
                         const uint64_t* recv_counts, const uint64_t* recv_displs,
                         const char* op = "all_to_all_v");
  absl::Status AllGatherV(const dist_buffer_t& send, const dist_buffer_t& recv,
                          const uint64_t* recv_counts, const uint64_t* recv_displs);
  absl::Status ReduceScatterV(const dist_buffer_t& send, const dist_buffer_t& recv,
                              const uint64_t* recv_counts, dist_reduce_op_t op);

  // Starts one operation; `device` selects the backend.
  absl::StatusOr<dist_work_t*> Submit(dist_collective_t kind, const dist_op_args_t& args);

  // Runs one operation to its end (the blocking form of every operation):
  // through the backend's `run` when its table has one (ABI 1.2), else
  // submitted and waited for.
  absl::Status Run(dist_collective_t kind, const dist_op_args_t& args);

  // dist_sendrecv: a send and a recv issued together and waited for, as one
  // call: through the backend's `run_sendrecv` when its table has one (ABI
  // 1.3) and both go to the same communicator, else submitted and waited for.
  absl::Status RunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv);

  void Abort(const std::string& reason);

  // dist_revoke, dist_failed_ranks, dist_shrink (core/survival.h).
  void Revoke(const std::string& reason);
  std::vector<FailedRank> FailedRanks() const;
  absl::StatusOr<std::unique_ptr<ProcessGroup>> Shrink(absl::Duration timeout);
  // dist_grow (core/grow_admission.h): `joiners` 0 admits every one waiting.
  absl::StatusOr<std::unique_ptr<ProcessGroup>> Grow(int32_t joiners, absl::Duration timeout);

  int32_t rank() const { return rank_; }
  int32_t world_size() const { return world_size_; }
  absl::Duration timeout() const { return timeout_; }
  const char* BackendName(dist_device_type_t device) const;
  const FlightRecorder& recorder() const { return *tracing_->recorder(); }
  // The process that made this group (core/fork_guard.h), and how errors
  // name the group ("process group 'default'").
  const ForkOwner& fork_owner() const { return fork_owner_; }
  std::string Description() const;

 private:
  // Where an operation that passed the core's checks goes.
  struct Route {
    const BackendComm* comm = nullptr;
    const PluginRecord* plugin = nullptr;
    dist_backend_op_fn fn = nullptr;  // the table's function for the operation
  };

  // An operation that passed the core's checks and was entered in the trace.
  struct Prepared {
    Route route;
    TracedOp op;
    dist_op_args_t args;  // as the backend gets them: marked DIST_OP_ARGS_CHECKED
  };

  ProcessGroup();
  // What Submit and Run share: the checks, the backend, the trace entry.
  // Fills `out` in place (every call's path: no StatusOr of a large struct).
  absl::Status Prepare(dist_collective_t kind, const dist_op_args_t& args, Prepared* out);
  // Starts a prepared operation through the table's function: OK with
  // *work set, else why it did not start (the backend's error, or no work
  // handle returned). Records nothing.
  absl::Status Start(dist_collective_t kind, const Prepared& prepared, dist_backend_work_t** work);
  // A prepared operation through the table's function, then work_wait up to
  // timeout_ms and work_destroy (backends without `run`). Records an error
  // the backend returned at issue (Failed) and sets *issued to false then.
  absl::Status IssueAndWait(dist_collective_t kind, const Prepared& prepared, int64_t timeout_ms,
                            bool* issued);
  // What a blocking call that failed (`status` is not OK) does at its end:
  // marks the store failed, aborts the group on a timeout (naming `what`),
  // completes the flight recorder entries and writes the dump. Returns the
  // status to report.
  absl::Status FailBlocking(const char* what, absl::Status status,
                            std::initializer_list<uint64_t> trace_ids);
  // The checks and the backend; a call that repeats this thread's previous
  // one on this group (same arguments, byte for byte) skips the checks, as
  // they depend only on the arguments and on what the group fixed at its
  // creation.
  absl::StatusOr<Route> RouteOf(dist_collective_t kind, const dist_op_args_t& args) const;
  absl::StatusOr<Route> CheckAndRoute(dist_collective_t kind, const dist_op_args_t& args) const;
  absl::StatusOr<const BackendComm*> CommFor(dist_collective_t kind,
                                             const dist_op_args_t& args) const;
  absl::Status NotMemberError() const;
  absl::Status StartTracing(const TraceOptions& options);  // core/group_tracing.h
  void AbortComms(const std::string& reason);
  // A group of `ranks` (ranks of this group; member i is ranks[i]) named
  // `name`, whose communicators live under `prefix` in the store: split
  // from this group's where the backend can split those ranks and
  // `may_split` (every rank of this group calls it then), else created anew
  // by the members, with `setup_timeout` bounding their creation.
  // `only`: the child has that backend alone, for CPU buffers, created anew
  // by the members (the host hierarchy's subgroups; `may_split` false).
  absl::StatusOr<std::unique_ptr<ProcessGroup>> MakeChild(const std::vector<int32_t>& ranks,
                                                          std::string name, std::string prefix,
                                                          bool may_split,
                                                          absl::Duration setup_timeout,
                                                          const PluginRecord* only = nullptr);
  // At dist_init: hierarchical collectives where ranks share hosts
  // (core/host_hierarchy.cc), if `wanted` (DIST_HIERARCHICAL) and they pay.
  absl::Status SetUpHierarchy(bool wanted);
  // The same ranks again, made at the first variable-count collective, whose
  // exchanges run there apart from the caller's tags.
  absl::StatusOr<ProcessGroup*> VariableCountGroup();
  // The backend's own variable-count collective (its table's run_v), or
  // nullopt where it has none for `kind` and the core builds it.
  std::optional<absl::Status> RunVariableOnBackend(const char* op, dist_collective_t kind,
                                                   const dist_op_args_t& args,
                                                   const dist_op_counts_t& counts);
  // dist_init of a joining process (DIST_JOIN): waits for a grow to admit
  // it, then sets up its communicators in the grown group.
  absl::Status JoinRunningGroup(const ResolvedConfig& config, const dist_rendezvous_hints_t& hints,
                                std::shared_ptr<StoreOwner> host_store);
  // Why `op` (dist_shrink, dist_grow) cannot make communicators of another
  // set of ranks on some backend, or OK.
  absl::Status CheckRebuild(const char* op) const;
  // Starts the survival monitor when survival is on (members only).
  absl::Status StartSurvival();
  // The group is revoked with `message`: operations fail with it from now.
  void ApplyRevoke(const std::string& message);
  // A blocking call's failure, or the revoke's DIST_REVOKED when the group
  // was revoked (asked of the store first: see SurvivalMonitor::PollRevoke).
  absl::Status RevokedOr(absl::Status status);

  const uint64_t id_;  // unique in the process, never reused: keys RouteOf's cache
  const ForkOwner fork_owner_;
  std::string name_;
  int32_t rank_ = -1;
  int32_t world_size_ = 0;
  int32_t local_rank_ = -1;
  int32_t local_world_size_ = -1;
  absl::Duration timeout_;
  int64_t timeout_ms_ = 0;  // timeout_ for every call (ToInt64Milliseconds is a call into Abseil)
  std::vector<int32_t> parent_ranks_;  // members, for non-member messages
  int32_t parent_rank_ = -1;
  std::string store_prefix_;  // this group's namespace in the shared store
  std::shared_ptr<StoreOwner> store_;
  std::vector<BackendComm> comms_;
  std::array<int, DIST_DEVICE_TYPE_COUNT> comm_for_device_{};  // index into comms_, -1 none
  std::vector<dist_kv_t> option_views_;
  std::vector<std::pair<std::string, std::string>> options_;
  int subgroup_counter_ = 0;
  int32_t global_rank_ = -1;  // rank in the default group: names the trace dump
  std::unique_ptr<GroupTracing> tracing_;
  SurvivalSettings survival_settings_;
  const std::shared_ptr<Revocation> revocation_ = std::make_shared<Revocation>();
  int shrink_epoch_ = 0;
  int grow_epoch_ = 0;
  // Where joining processes wait for this group's dist_grow: the job's
  // first group's namespace, kept through shrinks and grows.
  std::string join_prefix_;
  absl::Mutex variable_count_mu_;
  std::unique_ptr<ProcessGroup> variable_count_group_ ABSL_GUARDED_BY(variable_count_mu_);
  // Runs all_reduce, broadcast, all_gather and barrier where ranks share
  // hosts (nullptr: flat); before the communicators it came from.
  std::unique_ptr<HostHierarchy> hierarchy_;
  // Last: its thread calls back into the members above; destroyed first.
  std::unique_ptr<SurvivalMonitor> survival_;
};

}  // namespace dist

// The opaque handles of dist.h.
struct dist_process_group {
  std::unique_ptr<dist::ProcessGroup> group;
};

struct dist_work {
  const dist_backend_plugin_t* plugin = nullptr;
  dist_backend_work_t* work = nullptr;
  int64_t default_timeout_ms = 0;
  dist_collective_t kind = DIST_COLL_BARRIER;
  std::shared_ptr<dist::FlightRecorder> recorder;  // may outlive the group
  uint64_t trace_id = 0;                           // 0: not recorded
  std::shared_ptr<dist::StoreOwner> store;         // told when the operation fails
  dist::ForkOwner fork_owner;                      // the process that issued it
  std::shared_ptr<dist::Revocation> revocation;    // the group's: errors become DIST_REVOKED
};

#endif  // DIST_CORE_PROCESS_GROUP_H_

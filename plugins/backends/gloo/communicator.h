// One Gloo communicator: a Gloo context over TCP, a worker thread that runs
// the operations in issue order, and the failure/abort logic.
//
// Threads: callers issue operations from any thread (Enqueue only queues);
// the worker runs them one at a time; a second thread waits for posted
// send/recv operations (see p2p.cc). A caller that waits on the operation
// at the head of the queue while the worker is idle runs it itself, which
// saves two thread hand-offs per blocking call (README.md, "Design");
// option gloo.inline_wait=0 turns that off.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_COMMUNICATOR_H_
#define DIST_PLUGINS_BACKENDS_GLOO_COMMUNICATOR_H_

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"
#include "plugins/backends/gloo/algorithm.h"
#include "plugins/backends/gloo/bound_algorithms.h"
#include "plugins/backends/gloo/loop_kicker.h"
#include "plugins/backends/gloo/op.h"
#include "plugins/backends/gloo/sync_mesh.h"
#include "plugins/backends/gloo/work.h"

namespace dist_gloo {

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // Collective over every rank of `config`. `device` (the device and its
  // kicker) is the parent's for a subgroup, or null to open one.
  static absl::StatusOr<std::shared_ptr<Communicator>> Create(const dist_comm_config_t& config,
                                                              std::shared_ptr<LoopKicker> device);

  ~Communicator();

  // Checks and queues one operation. Errors visible at once (bad
  // arguments, an aborted communicator) are returned here.
  absl::StatusOr<std::shared_ptr<Work>> Issue(dist_collective_t kind, const dist_op_args_t& args);

  // A blocking call (the table's `run`): runs the collective on the calling
  // thread when nothing is queued or running and the caller waits at least
  // as long as the operation may take; otherwise issues it and waits up to
  // `wait_timeout`. No work handle, no queue, no worker wake-up.
  absl::Status Run(dist_collective_t kind, const dist_op_args_t& args, absl::Duration wait_timeout);

  // A collective with a count per rank (the table's run_v) that
  // RunsVariable: checked, its counts copied, then run as Run runs one, in
  // order with the operations issued before it.
  absl::Status RunVariable(dist_collective_t kind, const dist_op_args_t& args,
                           const dist_op_counts_t& counts, absl::Duration wait_timeout);

  // Runs `work` on the calling thread if it is next in line, nobody is
  // running an operation, and the caller is willing to wait as long as the
  // operation may take. Returns whether it ran.
  bool TryRunInline(const std::shared_ptr<Work>& work, absl::Duration wait_timeout);

  // Wakes a polling worker now: a caller is about to block on an operation
  // it did not run itself.
  void Poke();

  // Fails every pending and future operation with `reason`. Idempotent:
  // the first reason stays.
  void Abort(const std::string& reason);

  // Waits for outstanding work (up to the timeout), aborts what is left,
  // and stops the threads. Called once, by comm_destroy.
  void Shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::shared_ptr<LoopKicker>& device() const { return device_; }

 private:
  struct Task {
    Op op;
    std::shared_ptr<Work> work;
  };
  struct PendingP2p {
    PostedP2p posted;
    Op op;
    std::shared_ptr<Work> work;
    std::chrono::steady_clock::time_point deadline;
  };

  Communicator(const dist_comm_config_t& config, std::shared_ptr<LoopKicker> device,
               std::shared_ptr<gloo::Context> context, AlgorithmPolicy policy, bool inline_wait,
               bool sync_pairs, size_t sync_max_bytes, absl::Duration spin);

  // Queues a checked operation (numbering it), or posts a send/recv at once
  // when nothing is ahead of it.
  absl::StatusOr<std::shared_ptr<Work>> Enqueue(Op op);
  // Run's body for a checked operation.
  absl::Status RunChecked(Op op, absl::Duration wait_timeout);
  void WorkerLoop();
  void P2pLoop();
  void Execute(Task task);
  // Runs one collective (not send/recv) on this thread; the operation's
  // status. Only the thread that set running_ calls it.
  absl::Status RunCollectiveOp(const Op& op);
  // The status of an operation that needs no Gloo call (the communicator
  // is aborted, or there is nothing to move), else nullopt.
  std::optional<absl::Status> SettledWithoutGloo(const Op& op) const;
  // Ends an operation the caller ran on its own thread (TryRunInline, Run):
  // clears running_ and hands what was queued meanwhile to the worker.
  void EndCallerRun();
  // Makes P2pLoop's wait on `posted` return at once (Gloo's abortWait*).
  void InterruptWait(PostedP2p& posted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs (or, for send/recv, posts) a task on the caller's thread, which
  // set running_ for it: Execute with SIGPIPE kept away, then EndCallerRun.
  void ExecuteHere(Task task);
  // What the operation runs with (and the transport's timeout set for it).
  OpEnv EnvFor(const Op& op);
  std::chrono::milliseconds OpTimeout(const dist_op_args_t& args) const {
    return std::chrono::milliseconds(args.timeout_ms > 0 ? args.timeout_ms : timeout_.count());
  }
  // Turns a Gloo exception into the operation's error and aborts;
  // `on_sync_pairs`: the operation ran on the SyncMesh's pairs.
  absl::Status Fail(const Op& op, const std::string& what, bool on_sync_pairs = false);
  absl::Status AbortedStatus() const;
  std::chrono::milliseconds GlooTimeout(const Op& op) const;
  absl::Duration Grace(const Op& op) const;

  const int rank_;
  const int size_;
  const std::string group_;
  const std::chrono::milliseconds timeout_;
  const dist_store_t* store_;
  // Gloo's device, kicked while pairs close (abort, destroy); shared with
  // subgroups and the synchronous pairs (loop_kicker.h).
  std::shared_ptr<LoopKicker> device_;
  std::shared_ptr<gloo::Context> context_;
  std::vector<std::string> peer_addresses_;
  const AlgorithmPolicy policy_;
  const bool inline_wait_;
  // The timeout every connection waits with (set when they were made): the
  // Gloo timeout of an operation with the communicator's timeout.
  const std::chrono::milliseconds pair_timeout_;
  // The synchronous pairs for small messages (sync_mesh.h); null when
  // turned off (gloo.sync_pairs=0).
  std::unique_ptr<SyncMesh> sync_;
  // Only the thread running an operation (one at a time) touches it.
  std::unique_ptr<BoundAlgorithms> bound_;

  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<PendingP2p> p2p_ ABSL_GUARDED_BY(mu_);
  bool p2p_waiting_ ABSL_GUARDED_BY(mu_) = false;
  // The posted send/recv P2pLoop waits on, for Abort to interrupt: a failed
  // pair does not reach a recv whose sender had already announced itself.
  PostedP2p* p2p_current_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool worker_polling_ ABSL_GUARDED_BY(mu_) = false;
  bool poked_ ABSL_GUARDED_BY(mu_) = false;
  bool callers_run_ops_ ABSL_GUARDED_BY(mu_) = false;  // the last operation ran inline
  absl::Time last_issue_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);  // "" while healthy
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread worker_;
  std::thread p2p_thread_;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_COMMUNICATOR_H_

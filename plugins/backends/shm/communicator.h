// A communicator: the segment, a worker thread that runs operations in issue
// order, abort and failure state.
#ifndef DIST_PLUGINS_BACKENDS_SHM_COMMUNICATOR_H_
#define DIST_PLUGINS_BACKENDS_SHM_COMMUNICATOR_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "abort_state.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "bootstrap.h"
#include "collectives.h"
#include "dist/backend_plugin.h"
#include "fifo.h"
#include "point_to_point.h"
#include "segment.h"
#include "waiter.h"
#include "work.h"

namespace dist_shm {

class Communicator {
 public:
  // Collective over the config's ranks.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const dist_comm_config_t& config);
  // Waits for outstanding work up to the timeout (then aborts it), leaves.
  ~Communicator();

  // Validates and queues one operation.
  absl::StatusOr<std::shared_ptr<Work>> Issue(dist_collective_t collective,
                                              const dist_op_args_t& args);
  // The blocking form (the table's `run`): a collective issued on an idle
  // communicator by a caller that waits as long as it may take runs right
  // here, with no work, task or queue entry; anything else is issued and
  // waited for.
  absl::Status Run(dist_collective_t collective, const dist_op_args_t& args,
                   absl::Duration wait_timeout);
  // dist_sendrecv on the calling thread: on an idle communicator, the send
  // straight into its ring and the recv straight out of the peer's (SendNow,
  // ReceiveNow: no work handle, no allocation); when either cannot, posts
  // what is left and moves the bytes until both are done (one allocation
  // for both works). nullopt when it cannot run here (other operations in
  // flight): the caller issues both and waits instead.
  std::optional<absl::Status> TryRunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                                             absl::Duration wait_timeout);
  void Abort(const std::string& reason);

  // Runs `work` on the calling thread if it is the only operation in
  // flight, the worker is idle, and the caller waits at least as long as
  // the operation may take; else makes sure the worker will run it.
  // Returns whether it ran here.
  bool TryRunInline(const void* work, absl::Duration wait_timeout);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  struct Task {
    dist_collective_t collective;
    dist_op_args_t args;
    std::shared_ptr<Work> work;
  };
  // The send/recv a waiting caller takes from the queue (usually one or
  // two: no allocation per wait).
  static constexpr size_t kSendRecvTasks = 4;
  using SendRecvTasks = absl::InlinedVector<Task, kSendRecvTasks>;
  // An operation that has started; completions are published in issue
  // order, so a send still streaming holds back the operations after it.
  struct Started {
    std::shared_ptr<Work> work;
    bool done = false;
    absl::Status status;
  };

  Communicator(const dist_comm_config_t& config, std::unique_ptr<Segment> segment,
               std::unique_ptr<PeerReader> reader, const Tuning& tuning);
  void WorkerLoop();
  // Waits on worker_cv_ until wake_ or stopping_, at most `timeout`;
  // returns whether one of them is set.
  bool AwaitWake(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Execute(const Task& task);
  void Finish(Started* started, absl::Status status);
  // Completes the finished operations at the front of started_ (issue
  // order) and counts them out of outstanding_.
  void PublishFinished();
  // Marks the communicator broken after a failure that leaves the ranks out
  // of step (publishing it to the peers).
  void NoteFailure(const absl::Status& status);
  // OK, or why an operation cannot run now (aborted, broken). Inline: every
  // operation asks, and the answer is almost always two loads' worth of OK.
  absl::Status Usable(const char* what) {
    if (!abort_.aborted() && !is_broken_.load(std::memory_order_acquire)) return absl::OkStatus();
    return Unusable(what);
  }
  absl::Status Unusable(const char* what);  // Usable's error
  // Why a new operation is refused now (broken, being destroyed), or OK.
  absl::Status Refusal(const char* what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return broken_.ok() && !stopping_ ? absl::OkStatus() : Refused(what);
  }
  absl::Status Refused(const char* what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);  // Refusal's
  // The operation's timeout: its own, else the communicator's.
  int64_t TimeoutMs(const dist_op_args_t& args) const;
  // Name and deadline (from now) of an operation about to run.
  OpContext ContextFor(const char* what, const dist_op_args_t& args) const;
  // Whether everything in flight (but the `issuing` operations, counted
  // already and not queued yet) is send/recv still queued for a caller's
  // wait (TryRunInline).
  bool OnlySendRecvDeferred(int64_t issuing) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether Issue posts this operation on the issuing thread: a send with
  // nothing queued, while no thread moves send/recv, that fits in its ring
  // now (so it is done when posted).
  bool PostHere(dist_collective_t collective, const dist_op_args_t& args) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues an issued operation (counted in outstanding_ already) for the
  // worker, or for its caller's wait (deferred: README.md, "Asynchrony").
  void Enqueue(Task task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A caller that runs send/recv (inline_running_) moves their bytes on its
  // own thread until done() holds, `deadline` passes, or another operation
  // is issued (the worker then moves what is left, after EndInlineRun).
  void MoveSendRecvUntil(absl::FunctionRef<bool()> done, absl::Time deadline);
  // The fast path of a thread that runs send/recv (inline_running_): the
  // whole message straight into its ring / out of the peer's
  // (PointToPoint::SendNow, TryRecvNow), the recv within a spin, with no
  // record or callback. Each returns whether it did; if not, nothing was
  // consumed and the operation is posted as usual. Used by dist_sendrecv
  // (TryRunSendRecv), a send that fits at issue, and a caller's wait for
  // send/recv (RunSendRecv); only with nothing started before them
  // unfinished, as completions are published in issue order.
  bool SendNow(const dist_op_args_t& send);
  bool ReceiveNow(const dist_op_args_t& recv);
  // Runs the send/recv a waiting caller took (TakeSendRecv) on its thread:
  // straight through the rings where it can, else posted to the engine.
  // Returns how many it completed without Finish (for EndInlineRun).
  int64_t RunSendRecv(const SendRecvTasks& tasks);
  // Makes the worker take what is queued now (a caller will not run it);
  // returns false, for TryRunInline to return.
  bool HandToWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A caller waits for `work`, a send or recv in the queue: takes every
  // queued operation, if all are send/recv and the worker is not at work,
  // for the caller to post and move on its own thread (TryRunInline) until
  // `work` is done, its wait runs out or something else is issued. Refuses
  // (false) otherwise; the worker takes them then.
  bool TakeSendRecv(const void* work, absl::Duration wait_timeout, SendRecvTasks* tasks,
                    std::shared_ptr<Work>* mine) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a caller may run this operation on its own thread now:
  // `in_flight` operations are outstanding (counting this one if it is
  // queued already), and nothing else.
  bool MayRunInline(dist_collective_t collective, const dist_op_args_t& args,
                    absl::Duration wait_timeout, int64_t in_flight) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a caller's own run: the worker may go on; the operations Finish
  // completed on this run and `completed` more (run without Finish) leave
  // the outstanding count.
  void EndInlineRun(int64_t completed);
  // Tells the peers this rank's state (kFailed, kAborted, kLeft).
  void Publish(RankState state, const std::string& reason);
  void Log(dist_log_level_t level, const std::string& message) const;

  const int rank_;
  const int world_size_;
  const std::string group_;
  const int64_t timeout_ms_;
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<PeerReader> reader_;
  AbortState abort_;
  Waiter waiter_;
  Collectives collectives_;  // worker thread only
  PointToPoint p2p_;         // worker thread only
  // By value: a deque keeps its elements in place as it grows at the back
  // and shrinks at the front, so an operation's completion callback holds a
  // plain pointer (small enough for std::function's inline storage: no
  // allocation per operation).
  std::deque<Started> started_;  // whoever runs operations (worker or inline caller)
  // Also the runner's: a caller runs operations on its own thread (set with
  // inline_running_), and how many of them Finish completed meanwhile. They
  // leave outstanding_ at EndInlineRun, under the lock it takes anyway, not
  // with a lock of their own in Finish (the worker's still do: it may move
  // send/recv for a long time between its visits to mu_).
  bool caller_runs_ = false;
  int64_t finished_by_caller_ = 0;
  std::atomic<int> queued_{0};  // tasks in queue_, read without the lock

  absl::Mutex publish_mu_;  // serializes writes of this rank's state/reason

  absl::Mutex mu_;
  // The worker sleeps on this condition variable, not on conditions of
  // mu_: a thread waiting on a condition of mu_ makes every unlock of mu_
  // take Abseil's slow path to evaluate it (about 200 instructions each,
  // five times per blocking call). So whoever sets what the worker waits
  // for (wake_, stopping_, a first task while it is idle, the end of an
  // inline run it waits for) signals it.
  absl::CondVar worker_cv_;
  bool worker_idle_ ABSL_GUARDED_BY(mu_) = false;          // asleep until a task comes
  bool worker_waits_inline_ ABSL_GUARDED_BY(mu_) = false;  // until inline_running_ ends
  Fifo<Task> queue_ ABSL_GUARDED_BY(mu_);  // not std::deque: no node per task (fifo.h)
  // Blocking calls (issue, then wait at once) run on the caller's thread:
  // an operation issued on an idle communicator is not handed to the
  // worker at once (wake_ stays false) but left for the caller's wait
  // (TryRunInline). The worker takes it after kDeferral if nobody does, or
  // at once when woken (a second operation, send/recv, work_test, a wait
  // that cannot run it, destroy). README.md, "Asynchrony".
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool inline_running_ ABSL_GUARDED_BY(mu_) = false;  // a caller runs an op
  bool worker_busy_ ABSL_GUARDED_BY(mu_) = false;     // the worker runs one or moves send/recv
  absl::Time last_issue_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  const bool inline_wait_;
  std::shared_ptr<InlineGate> gate_;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // issued, not completed
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> is_broken_{false};  // broken_ is set; read without the lock
  std::thread worker_;
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_COMMUNICATOR_H_

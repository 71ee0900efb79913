// dist SDK, C++ side: the runtime a backend plugin builds on. A backend
// writes a Transport (its connections and algorithms: how to run one
// operation); the runtime's RuntimeComm turns it into a communicator of the
// plugin adapter (backend_adapter.hpp) and owns, once for every backend:
//   - issue order: operations are numbered (Op::seq) and run one at a time
//     in the order they were issued (ordered_executor.hpp); a blocking call
//     runs on its caller's thread, an asynchronous one on a worker;
//   - the work object: test, wait with a bound, completion callbacks
//     (completion.hpp);
//   - deadlines: each operation's own timeout, else the communicator's;
//   - abort and revoke: Revoke(status) fails every queued and later
//     operation with `status` and asks the transport to cut a running one
//     short (Transport::Interrupt); Abort is a revoke with ABORTED;
//   - comm_destroy: waits for issued work up to the timeout, then revokes;
//   - operations in flight (in_flight.hpp): a transport that only starts an
//     operation (Transport::Start) lets the next one start meanwhile; the
//     runtime orders shared buffers, and a waiter drives it to its end.
// The adapter has checked every operation's arguments already (the common
// rules of validate.hpp, the same the core applies); a Transport checks only
// what is its own (Transport::Check: devices, dtypes its library takes).
//
//     class MyTransport : public dist::Transport { ... };
//     return dist::MakeRuntimeComm(config, std::make_unique<MyTransport>(...));
#ifndef DIST_CPP_RUNTIME_HPP_
#define DIST_CPP_RUNTIME_HPP_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/backend_adapter.hpp"
#include "dist/cpp/coarse_clock.hpp"
#include "dist/cpp/completion.hpp"
#include "dist/cpp/in_flight.hpp"
#include "dist/cpp/ordered_executor.hpp"
#include "dist/cpp/sendrecv_order.hpp"
#include "dist/cpp/status.hpp"

namespace dist {

// One operation as the runtime hands it to the transport.
struct Op {
  dist_collective_t kind;
  dist_op_args_t args;  // checked; the buffers are the caller's until done
  // In issue order, the same on every rank that issues the same sequence:
  // for a collective, how many collectives this communicator ran before it;
  // for a send (recv), how many sends to (recvs from) args.peer with
  // args.tag before it. Lets a transport match messages without a handshake.
  uint64_t seq;
  // When it starts: start + its timeout (for RunNow read off the coarse
  // clock, dist/cpp/coarse_clock.hpp: up to a few milliseconds early).
  absl::Time deadline;
  // A variable-count collective's counts (RuntimeComm::RunVariable), else
  // null. Valid until Start returns: a transport that needs them later
  // copies them.
  const dist_op_counts_t* counts = nullptr;
};

// What a running operation may ask of the runtime.
class OpContext {
 public:
  virtual ~OpContext() = default;
  // OK, or why the communicator was revoked (ABORTED after an abort): a
  // transport that loops checks it every turn and returns it. Lock-free
  // while healthy.
  virtual absl::Status Interrupted() const = 0;
  // Revokes the communicator with `status` (a failure that leaves the ranks
  // out of step: later operations must not run).
  virtual void Revoke(const absl::Status& status) = 0;
};

// A backend's connections and algorithms, under one communicator. It
// implements Execute (runs an operation to its end), or Start (starts one
// and lets it finish in flight), or both.
class Transport {
 public:
  // How a transport reports the end of an operation it left in flight:
  // once, from any thread, holding no lock that its Start or Drive takes
  // (it may run the caller's completion callbacks).
  using Finish = std::function<void(const absl::Status&)>;

  virtual ~Transport() = default;
  // The backend's own checks of one operation (devices, dtypes), on the
  // issuing thread, before it is numbered. The common ones have passed.
  virtual absl::Status Check(dist_collective_t /*kind*/, const dist_op_args_t& /*args*/) {
    return absl::OkStatus();
  }
  // Runs one operation to its end, or to `op.deadline` (then
  // DEADLINE_EXCEEDED naming what did not arrive), or until ctx says it is
  // interrupted. Called for one operation at a time, in issue order, on the
  // worker or the issuing thread.
  virtual absl::Status Execute(const Op& /*op*/, OpContext& /*ctx*/) {
    return absl::UnimplementedError("the transport implements neither Execute nor Start");
  }
  // Starts one operation, in issue order, like Execute. Returns nullptr
  // when it ran to its end here, or the InFlight through which it ends
  // later: the transport then calls `finish` with its status (possibly
  // before Start returns). The runtime starts the next operation meanwhile,
  // after those in flight whose buffers it shares. An error: the operation
  // failed, `finish` is never called. By default, Execute.
  virtual absl::StatusOr<std::unique_ptr<InFlight>> Start(const Op& op, OpContext& ctx,
                                                          Finish /*finish*/) {
    absl::Status status = Execute(op, ctx);
    if (!status.ok()) return status;
    return std::unique_ptr<InFlight>();
  }
  // The fast path of a blocking call on an idle communicator with nothing
  // in flight, tried before the runtime allocates anything for it: runs
  // `op` to its end on the calling thread if that needs no waiting on
  // later progress (a collective it executes, a send that fits a buffer, a
  // message that is already there), and returns its status; nullopt when
  // it cannot, having done nothing (the runtime then Starts it). A small
  // operation costs a few hundred nanoseconds on a shared-memory
  // transport, where a work record and a callback per call would show.
  virtual std::optional<absl::Status> RunNow(const Op& /*op*/, OpContext& /*ctx*/) {
    return std::nullopt;
  }
  // Whether Start of `kind` returns at once (it only posts): an idle
  // communicator then starts it on the issuing thread, with no hand-off.
  virtual bool StartsAtOnce(dist_collective_t /*kind*/) const { return false; }
  // Whether Start takes the variable-count form of `kind` (op.counts set):
  // the table's run_v, when the Backend has_variable_counts(). Otherwise
  // the core builds it.
  virtual bool RunsVariableCounts(dist_collective_t /*kind*/) const { return false; }
  // From any thread, once: the communicator was revoked (abort, a failure);
  // make a running Execute return soon (close sockets, wake waiters), and
  // let go of what is in flight (its works have ended with the revoke).
  virtual void Interrupt(const absl::Status& /*why*/) {}
  // comm_split (see BackendComm::Split): this rank's transport of the
  // child, nullptr on a non-member. Only when the backend has_split().
  virtual absl::StatusOr<std::unique_ptr<Transport>> Split(const int32_t* /*ranks*/,
                                                           size_t /*num_ranks*/,
                                                           const dist_comm_config_t& /*config*/) {
    return absl::UnimplementedError("comm_split is not supported by this backend");
  }
};

// A mask with the given bits set: Bits({DIST_COLL_ALL_REDUCE, DIST_COLL_BARRIER}).
template <typename Enum>
constexpr uint32_t Bits(std::initializer_list<Enum> values) {
  uint32_t mask = 0;
  for (Enum value : values) mask |= 1u << value;
  return mask;
}

namespace internal {

// A copy of a variable-count collective's counts, for an operation that
// starts after its caller may have returned.
struct CountsCopy {
  CountsCopy(const dist_op_counts_t& counts, int world_size) {
    const auto copy = [world_size](const uint64_t* from, std::vector<uint64_t>* to) {
      if (from == nullptr) return static_cast<const uint64_t*>(nullptr);
      to->assign(from, from + world_size);
      return static_cast<const uint64_t*>(to->data());
    };
    view = counts;
    view.send_counts = copy(counts.send_counts, &send_counts);
    view.send_displs = copy(counts.send_displs, &send_displs);
    view.recv_counts = copy(counts.recv_counts, &recv_counts);
    view.recv_displs = copy(counts.recv_displs, &recv_displs);
  }
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
  dist_op_counts_t view;
};

}  // namespace internal

class RuntimeComm final : public BackendComm, private OpContext {
 public:
  RuntimeComm(const dist_comm_config_t& config, std::unique_ptr<Transport> transport)
      : rank_(config.rank),
        world_size_(config.world_size),
        group_(std::make_shared<const std::string>(config.group_name != nullptr ? config.group_name
                                                                                : "default")),
        timeout_ms_(config.timeout_ms > 0 ? config.timeout_ms : 300000),
        timeout_(absl::Milliseconds(timeout_ms_)),
        transport_(std::move(transport)) {}

  ~RuntimeComm() override {
    std::shared_ptr<FlightTask> last;
    {
      absl::MutexLock lock(executor_->mutex());
      last = last_;
    }
    if (!WaitIdle(last.get(), absl::Now() + timeout_)) {
      Revoke(absl::AbortedError(
          absl::StrCat(Prefix(), "communicator destroyed with work still pending")));
    }
    executor_->Stop();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  absl::StatusOr<std::unique_ptr<BackendWork>> Issue(dist_collective_t kind,
                                                     const dist_op_args_t& args) override;
  absl::Status Run(dist_collective_t kind, const dist_op_args_t& args,
                   absl::Duration timeout) override {
    DIST_RETURN_IF_ERROR(transport_->Check(kind, args));
    return RunChecked(kind, args, nullptr, timeout);
  }
  // Both on this thread through Transport::RunNow when the communicator
  // is idle and they can; else as BackendComm does (issue both, wait).
  absl::Status RunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                           absl::Duration timeout) override;
  absl::Status RunVariable(dist_collective_t kind, const dist_op_args_t& args,
                           const dist_op_counts_t& counts, absl::Duration timeout) override {
    if (!transport_->RunsVariableCounts(kind))
      return BackendComm::RunVariable(kind, args, counts, timeout);
    return RunChecked(kind, args, &counts, timeout);
  }
  void Abort(const std::string& reason) override {
    Revoke(absl::AbortedError(absl::StrCat(Prefix(), "communicator aborted: ", reason)));
  }
  // comm_split is one of the backend's collectives too (MPI_Comm_split): it
  // runs on the executor's turn, after every operation issued before it has
  // started, as it does on the other ranks.
  absl::StatusOr<std::unique_ptr<BackendComm>> Split(const int32_t* ranks, size_t num_ranks,
                                                     const dist_comm_config_t& config) override;

  // The revoke hook: every queued, in-flight and later operation fails with
  // `status`, a running one is interrupted. Thread-safe; the first status
  // stays.
  void Revoke(const absl::Status& status) override {
    {
      absl::MutexLock lock(&revoke_mu_);
      if (!revoked_.ok()) return;
      revoked_ = UnsharedCopy(status);
      is_revoked_.store(true, std::memory_order_release);
    }
    transport_->Interrupt(status);
    for (auto& task : executor_->TakeQueued()) task->completion.Complete(status);
    flights_->FinishAll(status);
  }
  absl::Status Interrupted() const override {
    if (!is_revoked_.load(std::memory_order_acquire)) return absl::OkStatus();
    absl::MutexLock lock(&revoke_mu_);
    return UnsharedCopy(revoked_);
  }

 private:
  class Work;

  std::string Prefix() const { return absl::StrCat(internal::BackendName(), ": "); }
  // "all_reduce on group 'g'"
  std::string Describe(dist_collective_t kind) const {
    return absl::StrCat(dist_collective_name(kind), " on group '", *group_, "'");
  }
  // Numbers `args` in issue order (under the executor's lock).
  uint64_t NextSeq(dist_collective_t kind, const dist_op_args_t& args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(executor_->mutex()) {
    if (kind == DIST_COLL_SEND) return sends_[{args.peer, args.tag}]++;
    if (kind == DIST_COLL_RECV) return recvs_[{args.peer, args.tag}]++;
    return collectives_++;
  }
  absl::Duration OpTimeout(const dist_op_args_t& args) const {
    return args.timeout_ms > 0 ? absl::Milliseconds(args.timeout_ms) : timeout_;
  }
  std::shared_ptr<FlightTask> NewTask(dist_collective_t kind, const dist_op_args_t& args,
                                      const dist_op_counts_t* counts) const {
    auto task = std::make_shared<FlightTask>();
    task->bound = OpTimeout(args);
    task->SetRanges(kind, args, rank_, counts);
    return task;
  }

  // Starts one numbered operation on this thread (the executor's turn),
  // after the operations in flight whose buffers it shares. Sets
  // task->completes_later when the operation stays in flight.
  absl::Status Launch(Op op, const std::shared_ptr<FlightTask>& task);
  // The operation's status once done, driving it while it is in flight;
  // DEADLINE_EXCEEDED at `until` or once it is overdue (it stays pending).
  absl::Status Await(FlightTask& task, absl::Time until) const;
  // comm_destroy: waits until `last` (the last operation issued) and
  // everything in flight are done, or `deadline`. Returns whether they are.
  bool WaitIdle(FlightTask* last, absl::Time deadline);
  // Transport::RunNow with the op's deadline set; its status, revoked ones
  // included, when it ran.
  std::optional<absl::Status> TryRunNow(Op& op);
  // Run and RunVariable after the transport's checks.
  absl::Status RunChecked(dist_collective_t kind, const dist_op_args_t& args,
                          const dist_op_counts_t* counts, absl::Duration timeout);
  // Numbers the operation and queues it for the worker, or starts it here
  // when the transport starts it at once and nothing is ahead of it.
  // Returns the task, or null with the error in *refused.
  std::shared_ptr<FlightTask> IssueChecked(dist_collective_t kind, const dist_op_args_t& args,
                                           std::shared_ptr<internal::CountsCopy> counts,
                                           absl::Status* refused);

  const int rank_;
  const int world_size_;
  // Shared with the work handles, which may outlive the communicator.
  const std::shared_ptr<const std::string> group_;
  const int64_t timeout_ms_;  // timeout_, for the fast path's integer arithmetic
  const absl::Duration timeout_;
  const std::unique_ptr<Transport> transport_;

  mutable absl::Mutex revoke_mu_;
  absl::Status revoked_ ABSL_GUARDED_BY(revoke_mu_);
  std::atomic<bool> is_revoked_{false};

  // Shared with the transport's finish callbacks.
  const std::shared_ptr<FlightSet> flights_ = std::make_shared<FlightSet>();
  const std::shared_ptr<OrderedExecutor> executor_ = std::make_shared<OrderedExecutor>();
  uint64_t collectives_ ABSL_GUARDED_BY(executor_->mutex()) = 0;
  // Per (peer, tag); hashed: a lookup per send/recv on the blocking path.
  // (std::, not absl::flat_hash_map: a plugin built out of the tree links
  // only the Abseil libraries dist.pc names.)
  struct PeerTagHash {
    size_t operator()(const std::pair<int32_t, int64_t>& key) const {
      return std::hash<int64_t>()(key.second * 1000003 + key.first);
    }
  };
  std::unordered_map<std::pair<int32_t, int64_t>, uint64_t, PeerTagHash> sends_
      ABSL_GUARDED_BY(executor_->mutex());
  std::unordered_map<std::pair<int32_t, int64_t>, uint64_t, PeerTagHash> recvs_
      ABSL_GUARDED_BY(executor_->mutex());
  std::shared_ptr<FlightTask> last_ ABSL_GUARDED_BY(executor_->mutex());
};

// An issued operation's handle; it may outlive the communicator.
class RuntimeComm::Work final : public BackendWork {
 public:
  Work(std::shared_ptr<FlightTask> task, std::shared_ptr<OrderedExecutor> executor,
       std::string what)
      : task_(std::move(task)), executor_(std::move(executor)), what_(std::move(what)) {}

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time until = absl::Now() + std::max(timeout, absl::ZeroDuration());
    if (!task_->completion.Done()) executor_->Help(task_.get(), timeout);
    for (;;) {
      if (task_->completion.Done()) return task_->completion.status();
      const absl::Time now = absl::Now();
      std::shared_ptr<InFlight> flight = task_->Flight();
      if (now >= until) return NotDone(flight.get(), now, timeout);
      if (flight != nullptr) {
        task_->DriveUntil(until);
      } else {
        // Queued, or started by another thread: not ours to drive yet.
        task_->completion.WaitFor(std::min(until - now, absl::Milliseconds(1)));
      }
    }
  }
  absl::Status Test(bool* done) override {
    // In flight: one turn of progress (a library without its own needs it).
    if (!task_->completion.Done()) task_->DriveUntil(absl::InfinitePast());
    *done = task_->completion.Done();
    return *done ? task_->completion.status() : absl::OkStatus();
  }
  // Completion callbacks (Completion::OnDone), for host code in C++.
  Completion& completion() { return task_->completion; }

 private:
  // The error of a wait that ended first: the transport's when the
  // operation is in flight past its own timeout, else "still runs".
  absl::Status NotDone(InFlight* flight, absl::Time now, absl::Duration waited) const {
    if (flight != nullptr && now >= task_->deadline) {
      absl::Status overdue = flight->Overdue();
      if (!overdue.ok()) return overdue;
      return absl::DeadlineExceededError(
          absl::StrCat(internal::BackendName(), ": ", what_,
                       " did not finish within its timeout of ", absl::FormatDuration(task_->bound),
                       "; it stays in flight: abort the communicator to end it"));
    }
    return absl::DeadlineExceededError(absl::StrCat(
        internal::BackendName(), ": ", what_, " still runs after waiting ",
        absl::FormatDuration(waited), "; it stays pending: wait again, or abort the communicator"));
  }

  const std::shared_ptr<FlightTask> task_;
  const std::shared_ptr<OrderedExecutor> executor_;
  const std::string what_;
};

inline absl::Status RuntimeComm::Launch(Op op, const std::shared_ptr<FlightTask>& task) {
  DIST_RETURN_IF_ERROR(Interrupted());
  op.deadline = absl::Now() + OpTimeout(op.args);
  task->deadline = op.deadline;
  while (std::shared_ptr<FlightTask> earlier = flights_->FirstSharing(task.get())) {
    if (!earlier->DriveUntil(op.deadline)) {
      DIST_RETURN_IF_ERROR(Interrupted());
      return absl::DeadlineExceededError(absl::StrCat(
          Prefix(), Describe(op.kind), " could not start within ",
          absl::FormatDuration(task->bound), ": an earlier ", dist_collective_name(earlier->kind),
          " that uses the same buffers is still in flight"));
    }
  }
  Transport::Finish finish = [flights = flights_,
                              weak = std::weak_ptr<FlightTask>(task)](const absl::Status& status) {
    if (std::shared_ptr<FlightTask> done = weak.lock()) flights->Finish(done, status);
  };
  absl::StatusOr<std::unique_ptr<InFlight>> started =
      transport_->Start(op, *this, std::move(finish));
  if (!started.ok() || *started == nullptr) {
    absl::Status status = started.ok() ? absl::OkStatus() : started.status();
    // Revoked while it ran: its result may be partial on some rank. (Its
    // own error, if any, says more: perhaps the revoke came from it.)
    if (!status.ok()) return status;
    return Interrupted();
  }
  {
    absl::MutexLock lock(&task->mu);
    task->flight = *std::move(started);
  }
  task->completes_later = true;
  // In the set only while it flies: it may have finished already (its
  // callback came first), and a revoke that came before it was added did
  // not see it.
  flights_->Add(task);
  if (absl::Status revoked = Interrupted(); !revoked.ok()) task->completion.Complete(revoked);
  if (task->completion.Done()) flights_->Remove(task);
  return absl::OkStatus();
}

inline bool RuntimeComm::WaitIdle(FlightTask* last, absl::Time deadline) {
  for (;;) {
    const bool last_done = last == nullptr || last->completion.Done();
    std::shared_ptr<FlightTask> oldest = flights_->FirstSharing(nullptr);
    if (last_done && oldest == nullptr) return true;
    if (absl::Now() >= deadline) return false;
    if (oldest != nullptr) {
      oldest->DriveUntil(deadline);
    } else {
      last->completion.WaitFor(std::min(deadline - absl::Now(), absl::Milliseconds(1)));
    }
  }
}

inline std::shared_ptr<FlightTask> RuntimeComm::IssueChecked(
    dist_collective_t kind, const dist_op_args_t& args,
    std::shared_ptr<internal::CountsCopy> counts, absl::Status* refused) {
  std::shared_ptr<FlightTask> task = NewTask(kind, args, counts ? &counts->view : nullptr);
  Op op{kind, args, 0, absl::InfiniteFuture(), counts ? &counts->view : nullptr};
  bool here = false;
  {
    absl::MutexLock lock(executor_->mutex());
    *refused = Interrupted();
    if (!refused->ok()) return nullptr;
    op.seq = NextSeq(kind, args);
    last_ = task;
    here = transport_->StartsAtOnce(kind) && flights_->FirstSharing(task.get()) == nullptr &&
           executor_->Claim();
    if (!here) {
      task->run = [this, op, counts, weak = std::weak_ptr<FlightTask>(task)] {
        std::shared_ptr<FlightTask> mine = weak.lock();  // the executor holds it
        return Launch(op, mine);
      };
      executor_->Submit(task);
    }
  }
  if (here) {
    absl::Status status = Launch(op, task);
    executor_->EndClaim();
    if (!task->completes_later) {
      task->completion.Complete(status);
      if (!status.ok()) {
        *refused = status;
        return nullptr;
      }
    }
  }
  return task;
}

inline absl::StatusOr<std::unique_ptr<BackendWork>> RuntimeComm::Issue(dist_collective_t kind,
                                                                       const dist_op_args_t& args) {
  DIST_RETURN_IF_ERROR(transport_->Check(kind, args));
  absl::Status refused;
  std::shared_ptr<FlightTask> task = IssueChecked(kind, args, nullptr, &refused);
  if (task == nullptr) return refused;
  return std::unique_ptr<BackendWork>(new Work(std::move(task), executor_, Describe(kind)));
}

inline std::optional<absl::Status> RuntimeComm::TryRunNow(Op& op) {
  // The coarse clock: absl::Now would be a tenth of a small call's time.
  op.deadline = CoarseDeadline(op.args.timeout_ms > 0 ? op.args.timeout_ms : timeout_ms_);
  std::optional<absl::Status> status = transport_->RunNow(op, *this);
  // Revoked while it ran: its result may be partial on some rank. (Its own
  // error, if any, says more: perhaps the revoke came from it.)
  if (status.has_value() && status->ok()) *status = Interrupted();
  return status;
}

inline absl::Status RuntimeComm::RunChecked(dist_collective_t kind, const dist_op_args_t& args,
                                            const dist_op_counts_t* counts,
                                            absl::Duration timeout) {
  // Runs here when the executor is idle and the caller waits as long as
  // the operation may take: no queue, no hand-off. Otherwise Issue + Wait.
  if (timeout >= OpTimeout(args)) {
    std::shared_ptr<FlightTask> task;
    Op op{kind, args, 0, absl::InfiniteFuture(), counts};
    bool claimed = false;
    bool idle = false;
    {
      absl::MutexLock lock(executor_->mutex());
      DIST_RETURN_IF_ERROR(Interrupted());
      // Nothing in flight stays so while we hold the claim: only a start
      // adds to it.
      idle = flights_->Empty();
      claimed = executor_->Claim();
      if (claimed) op.seq = NextSeq(kind, args);
    }
    if (claimed) {
      // Nothing in flight: the transport may run it without a record.
      if (idle) {
        if (std::optional<absl::Status> ran = TryRunNow(op); ran.has_value()) {
          executor_->EndClaim();
          return *std::move(ran);
        }
      }
      task = NewTask(kind, args, counts);
      {
        absl::MutexLock lock(executor_->mutex());
        last_ = task;
      }
      absl::Status status = Launch(op, task);
      executor_->EndClaim();
      if (!task->completes_later) {
        task->completion.Complete(status);
        return status;
      }
      // Until its own deadline: then the transport says who is missing.
      return Work(task, executor_, Describe(kind)).Wait(task->deadline - absl::Now());
    }
  }
  // The counts are the caller's only until this returns, which may be
  // before the operation starts.
  std::shared_ptr<internal::CountsCopy> copy;
  if (counts != nullptr) copy = std::make_shared<internal::CountsCopy>(*counts, world_size_);
  absl::Status refused;
  std::shared_ptr<FlightTask> task = IssueChecked(kind, args, std::move(copy), &refused);
  if (task == nullptr) return refused;
  return Work(std::move(task), executor_, Describe(kind)).Wait(timeout);
}

inline absl::Status RuntimeComm::RunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                                             absl::Duration timeout) {
  DIST_RETURN_IF_ERROR(transport_->Check(DIST_COLL_SEND, send));
  DIST_RETURN_IF_ERROR(transport_->Check(DIST_COLL_RECV, recv));
  if (timeout >= OpTimeout(send) && timeout >= OpTimeout(recv)) {
    Op send_op{DIST_COLL_SEND, send, 0, absl::InfiniteFuture(), nullptr};
    Op recv_op{DIST_COLL_RECV, recv, 0, absl::InfiniteFuture(), nullptr};
    bool claimed = false;
    {
      absl::MutexLock lock(executor_->mutex());
      DIST_RETURN_IF_ERROR(Interrupted());
      if (flights_->Empty() && executor_->Claim()) {
        claimed = true;
        send_op.seq = NextSeq(DIST_COLL_SEND, send);
        recv_op.seq = NextSeq(DIST_COLL_RECV, recv);
      }
    }
    if (claimed) {
      // The send first: it only writes (a peer that receives first must
      // not wait for our recv), and the recv may wait a spin at most.
      std::optional<absl::Status> sent = TryRunNow(send_op);
      std::optional<absl::Status> received;
      if (sent.has_value() && sent->ok()) received = TryRunNow(recv_op);
      if (sent.has_value() && received.has_value()) {
        executor_->EndClaim();
        return sent->ok() ? *std::move(received) : *std::move(sent);
      }
      // What is left starts as usual, still in issue order (the claim is
      // ours); both in SendRecvSendsFirst's order when the send did not
      // run here (a transport whose send blocks until it is received).
      std::shared_ptr<FlightTask> tasks[2];
      absl::Status statuses[2] = {sent.value_or(absl::OkStatus()), absl::OkStatus()};
      Op* ops[2] = {&send_op, &recv_op};
      int order[2] = {0, 1};
      if (!sent.has_value() && !SendRecvSendsFirst(rank_, send.peer)) std::swap(order[0], order[1]);
      for (int i : order) {
        if (i == 0 && sent.has_value()) continue;
        tasks[i] = NewTask(ops[i]->kind, ops[i]->args, nullptr);
        {
          absl::MutexLock lock(executor_->mutex());
          last_ = tasks[i];
        }
        statuses[i] = Launch(*ops[i], tasks[i]);
        if (!tasks[i]->completes_later) tasks[i]->completion.Complete(statuses[i]);
      }
      executor_->EndClaim();
      const absl::Time deadline = absl::Now() + timeout;
      for (int i = 0; i < 2; ++i) {
        if (tasks[i] == nullptr || !tasks[i]->completes_later) continue;
        statuses[i] = Work(tasks[i], executor_, Describe(ops[i]->kind))
                          .Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()));
      }
      return statuses[0].ok() ? statuses[1] : statuses[0];
    }
  }
  return BackendComm::RunSendRecv(send, recv, timeout);
}

inline absl::StatusOr<std::unique_ptr<BackendComm>> RuntimeComm::Split(
    const int32_t* ranks, size_t num_ranks, const dist_comm_config_t& config) {
  absl::StatusOr<std::unique_ptr<Transport>> child = absl::UnknownError("comm_split did not run");
  auto split = [&] {
    child = transport_->Split(ranks, num_ranks, config);
    return child.status();
  };
  auto task = std::make_shared<FlightTask>();
  task->bound = timeout_;
  bool here = false;
  {
    absl::MutexLock lock(executor_->mutex());
    here = executor_->Claim();
    if (!here) {
      // It captures this frame: it either runs before Split returns, or is
      // withdrawn.
      task->run = split;
      executor_->Submit(task);
    }
  }
  if (here) {
    (void)split();
    executor_->EndClaim();
  } else {
    // Runs it here if it is next (Help); the outcome is in `child`.
    (void)Work(task, executor_, "comm_split").Wait(timeout_);
    if (!task->completion.Done() && executor_->Withdraw(task.get())) {
      return absl::DeadlineExceededError(absl::StrCat(
          Prefix(), "comm_split on group '", *group_, "' could not start within ",
          absl::FormatDuration(timeout_),
          ": operations issued before it still run; wait for them, or abort the communicator"));
    }
    // Started: the transport's own bounds end it; past them once more, a
    // revoke cuts it short.
    if (!task->completion.WaitFor(timeout_)) {
      Revoke(absl::DeadlineExceededError(absl::StrCat(Prefix(), "comm_split on group '", *group_,
                                                      "' did not finish within ",
                                                      absl::FormatDuration(timeout_))));
      while (!task->completion.WaitFor(absl::Milliseconds(10))) {
      }
    }
  }
  if (!child.ok()) return child.status();
  if (*child == nullptr) return std::unique_ptr<BackendComm>();
  return std::unique_ptr<BackendComm>(new RuntimeComm(config, *std::move(child)));
}

// The communicator for `transport`, as Backend::CreateComm returns it.
inline absl::StatusOr<std::unique_ptr<BackendComm>> MakeRuntimeComm(
    const dist_comm_config_t& config, std::unique_ptr<Transport> transport) {
  return std::unique_ptr<BackendComm>(new RuntimeComm(config, std::move(transport)));
}

}  // namespace dist

#endif  // DIST_CPP_RUNTIME_HPP_

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
//   - comm_destroy: waits for issued work up to the timeout, then revokes.
// The adapter has checked every operation's arguments already (the common
// rules of validate.hpp, the same the core applies); a Transport checks only
// what is its own (Transport::Check: devices, dtypes its library takes).
//
//     class MyTransport : public dist::Transport { ... };
//     return dist::MakeRuntimeComm(config, std::make_unique<MyTransport>(...));
#ifndef DIST_CPP_RUNTIME_HPP_
#define DIST_CPP_RUNTIME_HPP_

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/backend_adapter.hpp"
#include "dist/cpp/completion.hpp"
#include "dist/cpp/ordered_executor.hpp"
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
  absl::Time deadline;  // when it starts: start + its timeout
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

// A backend's connections and algorithms, under one communicator.
class Transport {
 public:
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
  virtual absl::Status Execute(const Op& op, OpContext& ctx) = 0;
  // From any thread, once: the communicator was revoked (abort, a failure);
  // make a running Execute return soon (close sockets, wake waiters).
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

class RuntimeComm final : public BackendComm, private OpContext {
 public:
  RuntimeComm(const dist_comm_config_t& config, std::unique_ptr<Transport> transport)
      : rank_(config.rank),
        world_size_(config.world_size),
        group_(std::make_shared<const std::string>(config.group_name != nullptr ? config.group_name
                                                                                : "default")),
        timeout_(absl::Milliseconds(config.timeout_ms > 0 ? config.timeout_ms : 300000)),
        transport_(std::move(transport)) {}

  ~RuntimeComm() override {
    std::shared_ptr<OrderedExecutor::Task> last;
    {
      absl::MutexLock lock(executor_->mutex());
      last = last_;
    }
    if (last != nullptr && !last->completion.WaitFor(timeout_)) {
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
                   absl::Duration timeout) override;
  void Abort(const std::string& reason) override {
    Revoke(absl::AbortedError(absl::StrCat(Prefix(), "communicator aborted: ", reason)));
  }
  absl::StatusOr<std::unique_ptr<BackendComm>> Split(const int32_t* ranks, size_t num_ranks,
                                                     const dist_comm_config_t& config) override {
    absl::StatusOr<std::unique_ptr<Transport>> child = transport_->Split(ranks, num_ranks, config);
    if (!child.ok()) return child.status();
    if (*child == nullptr) return std::unique_ptr<BackendComm>();
    return std::unique_ptr<BackendComm>(new RuntimeComm(config, *std::move(child)));
  }

  // The revoke hook: every queued and later operation fails with `status`,
  // a running one is interrupted. Thread-safe; the first status stays.
  void Revoke(const absl::Status& status) override {
    {
      absl::MutexLock lock(&revoke_mu_);
      if (!revoked_.ok()) return;
      revoked_ = UnsharedCopy(status);
      is_revoked_.store(true, std::memory_order_release);
    }
    transport_->Interrupt(status);
    for (auto& task : executor_->TakeQueued()) task->completion.Complete(status);
  }
  absl::Status Interrupted() const override {
    if (!is_revoked_.load(std::memory_order_acquire)) return absl::OkStatus();
    absl::MutexLock lock(&revoke_mu_);
    return UnsharedCopy(revoked_);
  }

 private:
  std::string Prefix() const { return absl::StrCat(internal::BackendName(), ": "); }
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
  // Runs one numbered operation on this thread (the executor's turn).
  absl::Status Execute(Op op) {
    DIST_RETURN_IF_ERROR(Interrupted());
    op.deadline = absl::Now() + OpTimeout(op.args);
    absl::Status status = transport_->Execute(op, *this);
    // Revoked while it ran: its result may be partial on some rank.
    absl::Status interrupted = Interrupted();
    return interrupted.ok() ? status : interrupted;
  }

  class Work;
  // Issue after the transport's Check passed.
  std::unique_ptr<BackendWork> IssueChecked(dist_collective_t kind, const dist_op_args_t& args,
                                            absl::Status* refused);

  const int rank_;
  const int world_size_;
  // Shared with the work handles, which may outlive the communicator.
  const std::shared_ptr<const std::string> group_;
  const absl::Duration timeout_;
  const std::unique_ptr<Transport> transport_;

  mutable absl::Mutex revoke_mu_;
  absl::Status revoked_ ABSL_GUARDED_BY(revoke_mu_);
  std::atomic<bool> is_revoked_{false};

  const std::shared_ptr<OrderedExecutor> executor_ = std::make_shared<OrderedExecutor>();
  uint64_t collectives_ ABSL_GUARDED_BY(executor_->mutex()) = 0;
  std::map<std::pair<int32_t, int64_t>, uint64_t> sends_ ABSL_GUARDED_BY(executor_->mutex());
  std::map<std::pair<int32_t, int64_t>, uint64_t> recvs_ ABSL_GUARDED_BY(executor_->mutex());
  std::shared_ptr<OrderedExecutor::Task> last_ ABSL_GUARDED_BY(executor_->mutex());
};

// An issued operation's handle; it may outlive the communicator.
class RuntimeComm::Work final : public BackendWork {
 public:
  Work(std::shared_ptr<OrderedExecutor::Task> task, std::shared_ptr<OrderedExecutor> executor,
       dist_collective_t kind, std::shared_ptr<const std::string> group)
      : task_(std::move(task)),
        executor_(std::move(executor)),
        kind_(kind),
        group_(std::move(group)) {}

  absl::Status Wait(absl::Duration timeout) override {
    if (!task_->completion.Done()) executor_->Help(task_.get(), timeout);
    if (!task_->completion.WaitFor(timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat(internal::BackendName(), ": ", dist_collective_name(kind_), " on group '",
                       *group_, "' still runs after waiting ", absl::FormatDuration(timeout),
                       "; it stays pending: wait again, or abort the communicator"));
    }
    return task_->completion.status();
  }
  absl::Status Test(bool* done) override {
    *done = task_->completion.Done();
    return *done ? task_->completion.status() : absl::OkStatus();
  }
  // Completion callbacks (Completion::OnDone), for host code in C++.
  Completion& completion() { return task_->completion; }

 private:
  const std::shared_ptr<OrderedExecutor::Task> task_;
  const std::shared_ptr<OrderedExecutor> executor_;
  const dist_collective_t kind_;
  const std::shared_ptr<const std::string> group_;
};

inline std::unique_ptr<BackendWork> RuntimeComm::IssueChecked(dist_collective_t kind,
                                                              const dist_op_args_t& args,
                                                              absl::Status* refused) {
  auto task = std::make_shared<OrderedExecutor::Task>();
  task->bound = OpTimeout(args);
  {
    absl::MutexLock lock(executor_->mutex());
    *refused = Interrupted();
    if (!refused->ok()) return nullptr;
    Op op{kind, args, NextSeq(kind, args), absl::InfiniteFuture()};
    task->run = [this, op] { return Execute(op); };
    last_ = task;
    executor_->Submit(task);
  }
  return std::unique_ptr<BackendWork>(new Work(std::move(task), executor_, kind, group_));
}

inline absl::StatusOr<std::unique_ptr<BackendWork>> RuntimeComm::Issue(dist_collective_t kind,
                                                                       const dist_op_args_t& args) {
  DIST_RETURN_IF_ERROR(transport_->Check(kind, args));
  absl::Status refused;
  std::unique_ptr<BackendWork> work = IssueChecked(kind, args, &refused);
  if (work == nullptr) return refused;
  return work;
}

inline absl::Status RuntimeComm::Run(dist_collective_t kind, const dist_op_args_t& args,
                                     absl::Duration timeout) {
  DIST_RETURN_IF_ERROR(transport_->Check(kind, args));
  // Runs here when the executor is idle and the caller waits as long as
  // the operation may take: no task, no hand-off. Otherwise Issue + Wait.
  if (timeout >= OpTimeout(args)) {
    bool claimed = false;
    Op op{kind, args, 0, absl::InfiniteFuture()};
    {
      absl::MutexLock lock(executor_->mutex());
      DIST_RETURN_IF_ERROR(Interrupted());
      claimed = executor_->Claim();
      if (claimed) {
        op.seq = NextSeq(kind, args);
        last_ = nullptr;  // nothing issued before is pending
      }
    }
    if (claimed) {
      absl::Status status = Execute(op);
      executor_->EndClaim();
      return status;
    }
  }
  absl::Status refused;
  std::unique_ptr<BackendWork> work = IssueChecked(kind, args, &refused);
  if (work == nullptr) return refused;
  return work->Wait(timeout);
}

// The communicator for `transport`, as Backend::CreateComm returns it.
inline absl::StatusOr<std::unique_ptr<BackendComm>> MakeRuntimeComm(
    const dist_comm_config_t& config, std::unique_ptr<Transport> transport) {
  return std::unique_ptr<BackendComm>(new RuntimeComm(config, std::move(transport)));
}

}  // namespace dist

#endif  // DIST_CPP_RUNTIME_HPP_

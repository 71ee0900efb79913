#include "communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bootstrap.h"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "validate.h"

namespace dist_shm {
namespace {

// How long an operation issued on an idle communicator waits for its
// caller to run it (TryRunInline) before the worker takes it, and how long
// after the last issue the worker keeps looking for such operations.
constexpr absl::Duration kDeferral = absl::Microseconds(500);
constexpr absl::Duration kPollWindow = absl::Milliseconds(20);
constexpr absl::Duration kBusyPoll = absl::Milliseconds(2);

bool IsPointToPoint(dist_collective_t collective) {
  return collective == DIST_COLL_SEND || collective == DIST_COLL_RECV;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Create(
    const dist_comm_config_t& config) {
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm: rank ", config.rank, " is outside world size ", config.world_size));
  }
  if (config.store == nullptr) {
    return absl::InvalidArgumentError("shm: comm_create needs a store (config->store is NULL)");
  }
  absl::StatusOr<Tuning> tuning = ParseTuning(config);
  if (!tuning.ok()) return tuning.status();
  const std::string group = config.group_name ? config.group_name : "default";
  absl::StatusOr<std::unique_ptr<Segment>> segment = JoinSegment(config, *tuning, group);
  if (!segment.ok()) return segment.status();
  // Every rank published its probe word (JoinSegment) before it attached.
  const bool single_copy = tuning->single_copy_from_bytes != kNeverSingleCopy;
  auto reader = std::make_unique<PeerReader>(**segment, config.rank, single_copy);
  const std::string unreadable = reader->unreadable();
  std::unique_ptr<Communicator> comm(
      new Communicator(config, *std::move(segment), std::move(reader), *tuning));
  std::string by_reference = "send/recv through the rings only (shm.single_copy_bytes=0)";
  if (single_copy) {
    by_reference = absl::StrCat(
        "send/recv from ", tuning->single_copy_from_bytes, " B by reference from ",
        unreadable.empty() ? "every peer" : absl::StrCat("the peers it can read; ", unreadable));
  }
  comm->Log(DIST_LOG_DEBUG, absl::StrCat("group '", group, "' rank ", config.rank, "/",
                                         config.world_size, " on segment ", comm->segment_->name(),
                                         " (slots ", comm->segment_->slot_bytes(), " B, rings ",
                                         comm->segment_->ring_bytes(), " B); ", by_reference));
  return comm;
}

Communicator::Communicator(const dist_comm_config_t& config, std::unique_ptr<Segment> segment,
                           std::unique_ptr<PeerReader> reader, const Tuning& tuning)
    : rank_(config.rank),
      world_size_(config.world_size),
      group_(config.group_name ? config.group_name : "default"),
      timeout_ms_(config.timeout_ms > 0 ? config.timeout_ms : 300000),
      segment_(std::move(segment)),
      reader_(std::move(reader)),
      waiter_(segment_.get(), rank_, group_, &abort_, tuning.spin, tuning.spin_yields),
      collectives_(segment_.get(), &waiter_, rank_, tuning.stream_from_bytes),
      p2p_(segment_.get(), &waiter_, rank_, tuning.single_copy_from_bytes, reader_.get()),
      inline_wait_(tuning.inline_wait),
      gate_(std::make_shared<InlineGate>([this](const void* work, absl::Duration timeout) {
        return TryRunInline(work, timeout);
      })) {
  waiter_.set_progress([this] { return p2p_.Progress(); });
  worker_ = std::thread([this] { WorkerLoop(); });
}

Communicator::~Communicator() {
  gate_->Close();  // work handles may outlive this communicator
  bool idle = false;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_ = true;  // a deferred operation runs now
    worker_cv_.Signal();
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ == 0; };
    idle = mu_.AwaitWithTimeout(absl::Condition(&drained), absl::Milliseconds(timeout_ms_));
  }
  if (!idle) {
    Abort(absl::StrCat("comm_destroy gave up after ", timeout_ms_,
                       " ms waiting for outstanding operations"));
  }
  worker_.join();
  Publish(kLeft, "destroyed");
  Log(DIST_LOG_DEBUG, absl::StrCat("group '", group_, "' rank ", rank_, " destroyed"));
}

void Communicator::Log(dist_log_level_t level, const std::string& message) const {
  dist::Log(level, message);
}

void Communicator::Publish(RankState state, const std::string& reason) {
  absl::MutexLock lock(&publish_mu_);
  RankControl& me = segment_->rank(rank_);
  const uint32_t current = me.state.load(std::memory_order_relaxed);
  // Keep the first failure's story, also when leaving afterwards: peers
  // stop waiting either way, and learn the cause.
  if (current == kFailed || current == kAborted) {
    waiter_.NotifyOthers();
    return;
  }
  const size_t n = std::min(reason.size(), kReasonBytes - 1);
  std::memcpy(me.reason, reason.data(), n);
  me.reason[n] = '\0';
  me.state.store(state, std::memory_order_release);
  waiter_.NotifyOthers();
}

void Communicator::Abort(const std::string& reason) {
  if (!abort_.Set(reason)) return;
  Log(DIST_LOG_WARN, absl::StrCat("group '", group_, "' aborted: ", reason));
  Publish(kAborted, reason);
  waiter_.NotifySelf();
}

absl::StatusOr<std::shared_ptr<Work>> Communicator::Issue(dist_collective_t collective,
                                                          const dist_op_args_t& args) {
  const char* what = dist_collective_name(collective);
  if (abort_.aborted()) return waiter_.AbortedError(what);
  DIST_RETURN_IF_ERROR(ValidateOp(collective, args, rank_));
  auto work = std::make_shared<Work>(what, group_, inline_wait_ ? gate_ : nullptr);
  {
    absl::MutexLock lock(&mu_);
    DIST_RETURN_IF_ERROR(Refusal(what));
    last_issue_ = CoarseNow();  // 4 ns, not absl::Now's 58: it only tells 20 ms apart
    ++outstanding_;
    if (!PostHere(collective, args)) {
      Enqueue(Task{collective, args, work});
      return work;
    }
    inline_running_ = true;
    caller_runs_ = true;
  }
  // A send with nothing queued before it, while nobody moves send/recv,
  // that fits in the ring: written and done here, even if its caller
  // computes for a while before waiting for it.
  if (SendNow(args)) {
    work->CompleteUnshared(absl::OkStatus());
    EndInlineRun(/*completed=*/1);
    return work;
  }
  Execute(Task{collective, args, work});  // the communicator failed meanwhile
  EndInlineRun(/*completed=*/0);          // Finish counted what it completed
  return work;
}

bool Communicator::PostHere(dist_collective_t collective, const dist_op_args_t& args) const {
  // Only a send that is done as it is posted: one that left bytes behind
  // would need the worker, whose moves (a futex wake per ring-full) are far
  // slower than a waiting caller's.
  return inline_wait_ && collective == DIST_COLL_SEND && queue_.empty() && !worker_busy_ &&
         !inline_running_ && !stopping_ &&
         p2p_.SendFitsNow(args.peer, args.send.count * dist_dtype_size(args.send.dtype));
}

void Communicator::Enqueue(Task task) {
  // Deferred for the caller's wait only on an idle communicator, or, for
  // send/recv, behind other send/recv deferred the same way (a send and a
  // recv issued together, then waited for, move on the caller's thread:
  // TryRunInline). Anything else in flight goes to the worker.
  const bool defer = inline_wait_ && (outstanding_ == 1 || (IsPointToPoint(task.collective) &&
                                                            OnlySendRecvDeferred(/*issuing=*/1)));
  queue_.push_back(std::move(task));
  queued_.fetch_add(1, std::memory_order_release);
  if (!defer) {
    wake_ = true;
    worker_cv_.Signal();
    waiter_.NotifySelf();  // the worker may sleep on its bell with send/recv pending
  } else if (worker_idle_) {
    worker_cv_.Signal();  // asleep for good: it must take this one after kDeferral
  }
}

absl::Status Communicator::Refused(const char* what) const {
  if (!broken_.ok()) {
    return absl::Status(broken_.code(),
                        absl::StrCat("shm: ", what, " on group '", group_,
                                     "' refused: the communicator failed earlier (",
                                     broken_.message(), "); destroy it and create a new one"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("shm: ", what, " on group '", group_, "' issued during comm_destroy"));
}

int64_t Communicator::TimeoutMs(const dist_op_args_t& args) const {
  return args.timeout_ms > 0 ? args.timeout_ms : timeout_ms_;
}

OpContext Communicator::ContextFor(const char* what, const dist_op_args_t& args) const {
  const int64_t timeout_ms = TimeoutMs(args);
  return OpContext{what, CoarseDeadline(timeout_ms), timeout_ms};
}

bool Communicator::OnlySendRecvDeferred(int64_t issuing) const {
  if (wake_ || outstanding_ != static_cast<int64_t>(queue_.size()) + issuing) return false;
  return std::all_of(queue_.begin(), queue_.end(),
                     [](const Task& task) { return IsPointToPoint(task.collective); });
}

bool Communicator::MayRunInline(dist_collective_t collective, const dist_op_args_t& args,
                                absl::Duration wait_timeout, int64_t in_flight) const {
  // Only the one operation in flight, on an idle worker, for a caller
  // willing to wait as long as it may take: then it runs here, in order.
  // send/recv run here only through TakeSendRecv.
  return inline_wait_ && !IsPointToPoint(collective) && outstanding_ == in_flight &&
         !worker_busy_ && !inline_running_ && !stopping_ &&
         wait_timeout >= absl::Milliseconds(TimeoutMs(args));
}

void Communicator::EndInlineRun(int64_t completed) {
  const int64_t finished = completed + finished_by_caller_;
  finished_by_caller_ = 0;
  caller_runs_ = false;
  absl::MutexLock lock(&mu_);
  inline_running_ = false;
  outstanding_ -= finished;
  if (!p2p_.idle()) {
    // send/recv a caller posted and left unfinished (its own op is done, or
    // its wait ran out): the worker moves them from now on.
    wake_ = true;
    waiter_.NotifySelf();
  }
  if (worker_waits_inline_ || wake_) worker_cv_.Signal();
}

absl::Status Communicator::Run(dist_collective_t collective, const dist_op_args_t& args,
                               absl::Duration wait_timeout) {
  // As TryRunInline decides, but before anything is queued or allocated.
  const char* what = dist_collective_name(collective);
  if (abort_.aborted()) return waiter_.AbortedError(what);
  DIST_RETURN_IF_ERROR(ValidateOp(collective, args, rank_));
  bool here = false;
  {
    absl::MutexLock lock(&mu_);
    DIST_RETURN_IF_ERROR(Refusal(what));
    if (MayRunInline(collective, args, wait_timeout, /*in_flight=*/0)) {
      inline_running_ = true;
      caller_runs_ = true;
      ++outstanding_;
      here = true;
    }
  }
  if (here) {
    absl::Status status = Usable(what);
    if (status.ok()) {
      status = collectives_.Run(collective, args, ContextFor(what, args));
      if (!status.ok()) NoteFailure(status);
    }
    EndInlineRun(/*completed=*/1);
    return status;
  }
  absl::StatusOr<std::shared_ptr<Work>> work = Issue(collective, args);
  if (!work.ok()) return work.status();
  return (*work)->Wait(wait_timeout);
}

std::optional<absl::Status> Communicator::TryRunSendRecv(const dist_op_args_t& send,
                                                         const dist_op_args_t& recv,
                                                         absl::Duration wait_timeout) {
  if (!inline_wait_ || wait_timeout <= absl::ZeroDuration()) return std::nullopt;
  if (abort_.aborted()) return waiter_.AbortedError("send");
  DIST_RETURN_IF_ERROR(ValidateOp(DIST_COLL_SEND, send, rank_));
  DIST_RETURN_IF_ERROR(ValidateOp(DIST_COLL_RECV, recv, rank_));
  {
    absl::MutexLock lock(&mu_);
    DIST_RETURN_IF_ERROR(Refusal("send"));
    if (outstanding_ != 0 || worker_busy_ || inline_running_ || stopping_) return std::nullopt;
    last_issue_ = CoarseNow();
    outstanding_ += 2;
    inline_running_ = true;
    caller_runs_ = true;
  }
  const absl::Time deadline = CoarseNow() + wait_timeout;
  // The common case (both messages fit their rings, the peer is at most a
  // spin behind) with no operation records at all: the send goes straight
  // into its ring, the recv straight out of the other.
  const bool sent_now = SendNow(send);
  if (sent_now && ReceiveNow(recv)) {
    EndInlineRun(/*completed=*/2);
    return absl::OkStatus();
  }
  // Both works in one allocation; each task holds its own alias of it.
  struct Pair {
    explicit Pair(const std::string& group) : send("send", group), recv("recv", group) {}
    Work send;
    Work recv;
  };
  auto pair = std::make_shared<Pair>(group_);
  std::shared_ptr<Work> sent(pair, &pair->send);
  std::shared_ptr<Work> received(pair, &pair->recv);
  // As TryRunInline moves send/recv (MoveSendRecvUntil): the worker moves
  // what is left if another operation is issued meanwhile.
  if (sent_now) {
    sent->Complete(absl::OkStatus());
  } else {
    Execute(Task{DIST_COLL_SEND, send, sent});
  }
  Execute(Task{DIST_COLL_RECV, recv, received});
  if (!received->Done() || !sent->Done()) {
    MoveSendRecvUntil([&sent, &received] { return received->Done() && sent->Done(); }, deadline);
  }
  EndInlineRun(/*completed=*/sent_now ? 1 : 0);  // Finish counted what it completed
  // Done already in the common case; else the worker finishes them, within
  // what is left of the wait.
  auto finish = [deadline](Work& work) {
    return work.Wait(work.Done() ? absl::ZeroDuration()
                                 : std::max(deadline - CoarseNow(), absl::ZeroDuration()));
  };
  absl::Status status = finish(*sent);
  absl::Status recv_status = finish(*received);
  return status.ok() ? recv_status : status;
}

int64_t Communicator::RunSendRecv(const SendRecvTasks& tasks) {
  // Completions are published in issue order, and a small message is
  // cheapest straight through its ring. So: every send that fits goes into
  // its ring first, in issue order (a peer that receives before it sends
  // must not wait for our recv); then in issue order each operation either
  // completes at once (a send written above, a recv whose message is
  // there within a spin), or it and everything after it go through the
  // engine, the sends written above as started and done.
  bool written[kSendRecvTasks] = {};
  const size_t fast = started_.empty() && tasks.size() <= kSendRecvTasks ? tasks.size() : 0;
  for (size_t i = 0; i < fast; ++i) {
    if (tasks[i].collective != DIST_COLL_SEND) continue;
    if (!SendNow(tasks[i].args)) break;  // a later send must not overtake it
    written[i] = true;
  }
  int64_t completed = 0;
  bool engine = fast == 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& task = tasks[i];
    // Only the first `fast` tasks can have been written: `written` holds
    // kSendRecvTasks flags, and a caller may have issued more than that.
    const bool was_written = i < fast && written[i];
    if (!engine && (was_written || (task.collective == DIST_COLL_RECV && ReceiveNow(task.args)))) {
      task.work->Complete(absl::OkStatus());
      ++completed;
      continue;
    }
    engine = true;
    if (was_written) {
      // Done, but published after the operations issued before it (at
      // once if they are done already: a recv from a message buffered
      // earlier completes as it is posted).
      started_.push_back(Started{task.work, /*done=*/true, absl::OkStatus()});
      PublishFinished();
    } else {
      Execute(task);
    }
  }
  return completed;
}

bool Communicator::SendNow(const dist_op_args_t& send) {
  // Only with nothing started before it unpublished (issue order).
  if (!started_.empty() || !Usable("send").ok()) return false;
  return p2p_.SendNow(send.peer, send.tag, send.send.data,
                      send.send.count * dist_dtype_size(send.send.dtype));
}

bool Communicator::ReceiveNow(const dist_op_args_t& recv) {
  const uint64_t bytes = recv.recv.count * dist_dtype_size(recv.recv.dtype);
  PointToPoint::RecvNow result = PointToPoint::RecvNow::kPost;
  auto arrived = [&] {
    result = p2p_.TryRecvNow(recv.peer, recv.tag, recv.recv.data, bytes);
    return result != PointToPoint::RecvNow::kNotYet;
  };
  if (!started_.empty() || !Usable("recv").ok()) return false;
  // A spin at most (Tuning::spin): a later message waits in PostRecv's
  // engine, which sleeps, checks the peer and keeps the deadline.
  if (!arrived()) waiter_.Spin(arrived);
  return result == PointToPoint::RecvNow::kDone;
}

void Communicator::WorkerLoop() {
  while (true) {
    Task task;
    bool have = false;
    {
      absl::MutexLock lock(&mu_);
      worker_busy_ = false;
      for (;;) {
        if (inline_running_) {
          // A caller runs an operation (only when nothing else was in flight).
          worker_waits_inline_ = true;
          while (inline_running_) worker_cv_.Wait(&mu_);
          worker_waits_inline_ = false;
          continue;
        }
        if (!queue_.empty() && wake_) break;
        if (queue_.empty() && !p2p_.idle()) break;  // move send/recv
        if (queue_.empty() && stopping_) return;
        // Not woken when a caller starts or ends an inline run: that would
        // cost the caller a futex wake (and this thread a context switch on
        // a busy CPU) twice per operation; a poll that finds one running
        // waits for it above.
        if (!queue_.empty()) {
          // Deferred: most likely its caller is about to wait and run it
          // itself. If it is still queued after kDeferral, take it.
          if (!AwaitWake(kDeferral) && !queue_.empty()) wake_ = true;
        } else if (CoarseNow() - last_issue_ < kPollWindow) {
          // Busy phase: look for deferred operations every kDeferral
          // without being woken by each issue (a wake-up costs the issuing
          // thread more than the rest of a small call).
          AwaitWake(kBusyPoll);
        } else {
          wake_ = false;
          worker_idle_ = true;
          // wake_ with an empty queue: a caller left send/recv to move.
          while (queue_.empty() && !stopping_ && !wake_) worker_cv_.Wait(&mu_);
          worker_idle_ = false;
          if (!queue_.empty()) wake_ = true;
        }
      }
      if (!queue_.empty()) {
        task = std::move(queue_.front());
        queue_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
        have = true;
      }
      if (queue_.empty()) wake_ = false;
      worker_busy_ = true;
    }
    if (have) {
      Execute(task);
    } else if (abort_.aborted()) {
      p2p_.FailAll(waiter_.AbortedError("send/recv"));
    } else {
      waiter_.Idle([this] { return queued_.load(std::memory_order_acquire) > 0; });
    }
  }
}

bool Communicator::AwaitWake(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!wake_ && !stopping_) {
    if (worker_cv_.WaitWithDeadline(&mu_, deadline)) return wake_ || stopping_;
  }
  return true;
}

bool Communicator::TryRunInline(const void* work, absl::Duration wait_timeout) {
  Task task;
  SendRecvTasks send_recv;
  std::shared_ptr<Work> mine;
  {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty() && IsPointToPoint(queue_.front().collective)) {
      if (!TakeSendRecv(work, wait_timeout, &send_recv, &mine)) return HandToWorker();
    } else {
      if (queue_.empty() || queue_.front().work.get() != work) return false;
      const Task& front = queue_.front();
      if (!MayRunInline(front.collective, front.args, wait_timeout, /*in_flight=*/1)) {
        return HandToWorker();
      }
      task = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    inline_running_ = true;
    caller_runs_ = true;
  }
  int64_t completed = 0;
  if (mine != nullptr) {
    // Run them all (each small one straight through its ring), then move
    // bytes until this caller's operation is done, its wait runs out, or
    // another operation is issued (from another thread: the worker runs it,
    // and moves these meanwhile).
    completed = RunSendRecv(send_recv);
    if (!mine->Done()) {
      MoveSendRecvUntil([&mine] { return mine->Done(); }, CoarseNow() + wait_timeout);
    }
  } else {
    Execute(task);
  }
  EndInlineRun(completed);  // and Finish counted what it completed
  return true;
}

void Communicator::MoveSendRecvUntil(absl::FunctionRef<bool()> done, absl::Time deadline) {
  // The wait fails nothing itself: each operation keeps its own deadline,
  // which Progress enforces, and Progress notices failed peers.
  (void)waiter_.Wait([this, done] { return done() || queued_.load(std::memory_order_acquire) > 0; },
                     [](std::vector<int>*) {}, OpContext{"send/recv", deadline, 0});
}

bool Communicator::HandToWorker() {
  wake_ = true;
  worker_cv_.Signal();
  waiter_.NotifySelf();  // it may sleep on its bell with send/recv pending
  return false;
}

bool Communicator::TakeSendRecv(const void* work, absl::Duration wait_timeout, SendRecvTasks* tasks,
                                std::shared_ptr<Work>* mine) {
  // Only when the queue holds nothing but send/recv: a collective queued
  // behind them must start while they wait (its peers may send only after
  // it), and only the worker runs both at once.
  for (const Task& task : queue_) {
    if (!IsPointToPoint(task.collective)) return false;
    if (task.work.get() == work) *mine = task.work;
  }
  if (*mine == nullptr || !inline_wait_ || worker_busy_ || inline_running_ || stopping_ ||
      wait_timeout <= absl::ZeroDuration()) {
    mine->reset();
    return false;
  }
  tasks->assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queued_.fetch_sub(static_cast<int>(queue_.size()), std::memory_order_relaxed);
  queue_.clear();
  return true;
}

void Communicator::NoteFailure(const absl::Status& status) {
  // A mismatch is found by every rank at the same step, so the segment stays
  // consistent; anything else leaves the ranks out of step for good.
  if (status.ok() || status.code() == absl::StatusCode::kInvalidArgument || abort_.aborted()) {
    return;
  }
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    if (broken_.ok()) {
      broken_ = status;
      is_broken_.store(true, std::memory_order_release);
      first = true;
    }
  }
  if (first) {
    Log(DIST_LOG_ERROR, std::string(status.message()));
    Publish(kFailed, std::string(status.message()));
  }
}

absl::Status Communicator::Unusable(const char* what) {
  if (abort_.aborted()) return waiter_.AbortedError(what);
  absl::Status broken;
  {
    absl::MutexLock lock(&mu_);
    broken = broken_;
  }
  return absl::Status(broken.code(), absl::StrCat("shm: ", what, " on group '", group_,
                                                  "' not run: the communicator failed earlier (",
                                                  broken.message(), ")"));
}

void Communicator::Finish(Started* started, absl::Status status) {
  if (!status.ok()) NoteFailure(status);
  started->done = true;
  started->status = std::move(status);
  PublishFinished();
}

void Communicator::PublishFinished() {
  int64_t published = 0;
  while (!started_.empty() && started_.front().done) {
    started_.front().work->Complete(started_.front().status);
    started_.pop_front();
    ++published;
  }
  if (published == 0) return;
  if (caller_runs_) {
    finished_by_caller_ += published;  // EndInlineRun counts them: one lock fewer
    return;
  }
  absl::MutexLock lock(&mu_);
  outstanding_ -= published;
}

void Communicator::Execute(const Task& task) {
  const char* what = dist_collective_name(task.collective);
  started_.push_back(Started{task.work, /*done=*/false, absl::OkStatus()});
  Started* started = &started_.back();
  if (absl::Status usable = Usable(what); !usable.ok()) return Finish(started, usable);
  const dist_op_args_t& a = task.args;
  const OpContext context = ContextFor(what, a);
  auto done = [this, started](absl::Status status) { Finish(started, std::move(status)); };
  if (task.collective == DIST_COLL_SEND) {
    p2p_.PostSend(a.peer, a.tag, a.send.data, a.send.count * dist_dtype_size(a.send.dtype), context,
                  done);
  } else if (task.collective == DIST_COLL_RECV) {
    p2p_.PostRecv(a.peer, a.tag, a.recv.data, a.recv.count * dist_dtype_size(a.recv.dtype), context,
                  done);
  } else {
    Finish(started, collectives_.Run(task.collective, a, context));
  }
}

}  // namespace dist_shm

#include "communicator.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bootstrap.h"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "validate.h"

namespace dist_shm {
namespace {

// How long a thread that finds another driving the engine sleeps before it
// looks whether that one finished its operation too.
constexpr absl::Duration kDriverBusyNap = absl::Microseconds(50);
// How long past its deadline a waiter keeps moving an operation for the
// engine to fail it with its own message (the engine reads the coarse
// clock, a few milliseconds behind, every kCheckEvery).
constexpr absl::Duration kOverdueGrace = absl::Milliseconds(30);
// The runtime's abort message starts so (dist/cpp/runtime.hpp); the peers
// learn the caller's reason alone.
constexpr absl::string_view kAbortPrefix = "shm: communicator aborted: ";

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
      driver_waiter_(segment_.get(), rank_, group_, &abort_, tuning.spin, tuning.spin_yields),
      p2p_(segment_.get(), &driver_waiter_, rank_, tuning.single_copy_from_bytes, reader_.get()) {
  // A collective's waits move posted send/recv when no other thread does
  // (a peer may wait for them to finish its part of the collective).
  waiter_.set_progress([this] { return MoveSendRecv(/*wait=*/false); });
  driver_waiter_.set_progress([this] { return MoveSendRecv(/*wait=*/true); });
}

Communicator::~Communicator() {
  // The runtime finished or revoked every operation before destroying its
  // transport.
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

int64_t Communicator::TimeoutMs(const dist_op_args_t& args) const {
  return args.timeout_ms > 0 ? args.timeout_ms : timeout_ms_;
}

OpContext Communicator::ContextFor(const char* what, const dist_op_args_t& args) const {
  const int64_t timeout_ms = TimeoutMs(args);
  return OpContext{what, CoarseDeadline(timeout_ms), timeout_ms};
}

bool Communicator::Breaks(const absl::Status& status) {
  return !status.ok() && status.code() != absl::StatusCode::kInvalidArgument;
}

absl::Status Communicator::FailedEarlier(const absl::Status& status) const {
  return absl::Status(status.code(),
                      absl::StrCat("shm: the communicator of group '", group_, "' failed earlier (",
                                   status.message(), "); destroy it and create a new one"));
}

void Communicator::Fail(const absl::Status& status, dist::OpContext& ctx) {
  Log(DIST_LOG_ERROR, std::string(status.message()));
  // First, so that the peers learn this failure, not the revoke's words.
  Publish(kFailed, std::string(status.message()));
  ctx.Revoke(FailedEarlier(status));
}

absl::Status Communicator::RunCollective(const dist::Op& op, dist::OpContext& ctx) {
  const char* what = dist_collective_name(op.kind);
  absl::Status status =
      collectives_.Run(op.kind, op.args, OpContext{what, op.deadline, TimeoutMs(op.args)});
  if (!Breaks(status)) return status;
  // Cut short by a revoke (its waits end on the abort flag): the revoke's
  // reason is the story.
  if (absl::Status revoked = ctx.Interrupted(); !revoked.ok() && abort_.aborted()) return revoked;
  Fail(status, ctx);
  return status;
}

bool Communicator::SendNow(const dist_op_args_t& send) {
  absl::MutexLock lock(&engine_mu_);
  return p2p_.SendNow(send.peer, send.tag, send.send.data,
                      send.send.count * dist_dtype_size(send.send.dtype));
}

bool Communicator::ReceiveNow(const dist_op_args_t& recv, bool spin) {
  const uint64_t bytes = recv.recv.count * dist_dtype_size(recv.recv.dtype);
  PointToPoint::RecvNow result = PointToPoint::RecvNow::kPost;
  absl::MutexLock lock(&engine_mu_);
  auto arrived = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    result = p2p_.TryRecvNow(recv.peer, recv.tag, recv.recv.data, bytes);
    return result != PointToPoint::RecvNow::kNotYet;
  };
  // A spin at most (Tuning::spin), on the runtime's turn (waiter_ is its):
  // a later message waits in the engine, which sleeps, checks the peer and
  // keeps the deadline.
  if (!arrived() && spin) waiter_.Spin(arrived);
  return result == PointToPoint::RecvNow::kDone;
}

// A send or recv posted to the engine.
class Communicator::Posted : public dist::InFlight {
 public:
  struct State {
    std::atomic<bool> done{false};
    absl::Status status;  // written before done
  };
  Posted(Communicator* comm, std::shared_ptr<State> state)
      : comm_(comm), state_(std::move(state)) {}

  void Drive(absl::Time until) override { comm_->Drive(state_->done, until); }
  absl::Status Overdue() override {
    // The engine fails it with its own message (what, which peer) once it
    // sees the deadline on its coarse clock.
    comm_->Drive(state_->done, absl::Now() + kOverdueGrace);
    if (state_->done.load(std::memory_order_acquire)) return state_->status;
    return absl::OkStatus();
  }

 private:
  Communicator* const comm_;  // the runtime ends every operation before it destroys comm_
  const std::shared_ptr<State> state_;
};

std::unique_ptr<dist::InFlight> Communicator::Post(const dist::Op& op, dist::OpContext& ctx,
                                                   dist::Transport::Finish finish) {
  const char* what = dist_collective_name(op.kind);
  const dist_op_args_t& a = op.args;
  auto state = std::make_shared<Posted::State>();
  // Runs under the engine lock: the end is reported once it is let go.
  auto done = [this, state, finish = std::move(finish),
               ctx = &ctx](absl::Status status) mutable ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const bool breaks = Breaks(status) && !abort_.aborted();
    state->status = status;
    state->done.store(true, std::memory_order_release);
    ended_.push_back(Ended{std::move(finish), std::move(status), breaks ? ctx : nullptr});
  };
  std::vector<Ended> ended;
  {
    absl::MutexLock lock(&engine_mu_);
    if (op.kind == DIST_COLL_SEND) {
      p2p_.PostSend(a.peer, a.tag, a.send.data, a.send.count * dist_dtype_size(a.send.dtype),
                    ContextFor(what, a), std::move(done));
    } else {
      p2p_.PostRecv(a.peer, a.tag, a.recv.data, a.recv.count * dist_dtype_size(a.recv.dtype),
                    ContextFor(what, a), std::move(done));
    }
    engine_busy_.store(!p2p_.idle(), std::memory_order_release);
    ended.swap(ended_);
  }
  ReportEnded(std::move(ended));
  return std::make_unique<Posted>(this, std::move(state));
}

bool Communicator::MoveSendRecv(bool wait) {
  if (!engine_busy_.load(std::memory_order_acquire)) return false;
  std::vector<Ended> ended;
  bool moved = false;
  {
    if (wait) {
      engine_mu_.Lock();
    } else if (!engine_mu_.TryLock()) {
      return false;
    }
    moved = p2p_.Progress();
    engine_busy_.store(!p2p_.idle(), std::memory_order_release);
    if (!ended_.empty()) ended.swap(ended_);
    engine_mu_.Unlock();
  }
  if (!ended.empty()) ReportEnded(std::move(ended));
  return moved;
}

void Communicator::ReportEnded(std::vector<Ended> ended) {
  for (Ended& end : ended) {
    end.finish(end.status);
    if (end.revoke != nullptr) Fail(end.status, *end.revoke);
  }
}

void Communicator::Drive(const std::atomic<bool>& done, absl::Time until) {
  if (!driver_mu_.TryLock()) {
    // Another waiter moves every posted operation, ours too.
    const absl::Duration left = until - absl::Now();
    if (left > absl::ZeroDuration()) absl::SleepFor(std::min(left, kDriverBusyNap));
    return;
  }
  if (until <= absl::Now()) {
    MoveSendRecv(/*wait=*/true);  // a test: one turn
  } else {
    // The wait fails nothing itself: each operation keeps its own deadline,
    // which the engine enforces, and the engine notices failed peers.
    (void)driver_waiter_.Wait(
        [&done, this] { return done.load(std::memory_order_acquire) || abort_.aborted(); },
        [](std::vector<int>*) {}, OpContext{"send/recv", until, 0});
  }
  driver_mu_.Unlock();
}

void Communicator::Interrupt(const absl::Status& why) {
  const bool aborted = why.code() == absl::StatusCode::kAborted;
  const std::string reason(aborted ? absl::StripPrefix(why.message(), kAbortPrefix)
                                   : why.message());
  if (!abort_.Set(reason)) return;
  if (aborted) Log(DIST_LOG_WARN, absl::StrCat("group '", group_, "' aborted: ", reason));
  Publish(aborted ? kAborted : kFailed, reason);
  waiter_.NotifySelf();  // a wait asleep on this rank's bell ends now
  std::vector<Ended> ended;
  {
    absl::MutexLock lock(&engine_mu_);
    p2p_.FailAll(absl::Status(why.code(), why.message()));
    engine_busy_.store(false, std::memory_order_release);
    ended.swap(ended_);
  }
  for (Ended& end : ended) end.finish(end.status);  // no second revoke
}

}  // namespace dist_shm

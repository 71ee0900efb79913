#include "plugins/backends/gloo/communicator.h"

#include <cstdlib>
#include <exception>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/no_sigpipe.hpp"
#include "dist/cpp/store.hpp"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "plugins/backends/gloo/device.h"
#include "plugins/backends/gloo/failure.h"
#include "plugins/backends/gloo/full_mesh.h"
#include "plugins/backends/gloo/gloo_store.h"
#include "plugins/backends/gloo/pair_access.h"
#include "plugins/backends/gloo/sync_limit.h"
#include "plugins/backends/gloo/variable_counts.h"

namespace dist_gloo {
namespace {

// The barrier that settles the legacy classes' last messages at destroy
// (Shutdown): its tag (above every MatchTag, which is < 2^31) and its bound.
constexpr uint32_t kShutdownTag = 0x80000001u;
constexpr std::chrono::milliseconds kShutdownFlushBound{5000};

// Up to this many ranks synchronous pairs are on unless turned off.
constexpr int kMaxAutoSyncRanks = 64;
// How long dist's own classes poll a synchronous pair before sleeping in
// Gloo's read, where the group's ranks on this host fit its CPUs
// (peer_spin.h; README.md, "Waiting awake").
constexpr uint64_t kDefaultSpinMicros = 50;

// Time left to compare notes after a Gloo timeout (see Fail): a tenth of
// the operation's timeout, from 1 ms to 1 s.
absl::Duration GraceOf(std::chrono::milliseconds timeout) {
  const absl::Duration tenth = absl::FromChrono(timeout) / 10;
  return std::min(std::max(tenth, absl::Milliseconds(1)), absl::Seconds(1));
}

// How long Gloo itself may wait in an operation with `timeout`: what is
// left after the grace period (comparing notes takes up to 0.8 of it) and
// half a grace period of slack for a loaded host, so that the whole error
// still arrives within the timeout.
std::chrono::milliseconds GlooWaitOf(std::chrono::milliseconds timeout) {
  return timeout - absl::ToChronoMilliseconds(GraceOf(timeout) * 1.5);
}

std::string Setting(const dist_comm_config_t& config, const char* option, const char* env) {
  std::string value = FindOption(config, option);
  if (value.empty()) {
    const char* from_env = std::getenv(env);
    if (from_env != nullptr) value = from_env;
  }
  return value;
}

absl::Status RunOn(const Op& op, const OpEnv& env) {
  if (op.counts != nullptr) return RunVariableCollective(op, env);
  switch (op.kind) {
    case DIST_COLL_ALL_REDUCE:
      return RunAllReduce(op, env);
    case DIST_COLL_BROADCAST:
      return RunBroadcast(op, env);
    case DIST_COLL_REDUCE:
      return RunReduce(op, env);
    case DIST_COLL_ALL_GATHER:
      return RunAllGather(op, env);
    case DIST_COLL_GATHER:
      return RunGather(op, env);
    case DIST_COLL_SCATTER:
      return RunScatter(op, env);
    case DIST_COLL_REDUCE_SCATTER:
      return RunReduceScatter(op, env);
    case DIST_COLL_ALL_TO_ALL:
      return RunAllToAll(op, env);
    case DIST_COLL_BARRIER:
      return RunBarrier(op, env);
    default:
      return absl::InternalError(
          absl::StrCat("gloo backend: no runner for ", dist_collective_name(op.kind)));
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Communicator>> Communicator::Create(
    const dist_comm_config_t& config, std::shared_ptr<LoopKicker> device) {
  // Gloo writes without MSG_NOSIGNAL: Gloo's loop thread (started with the
  // device) and this communicator's threads inherit a mask with SIGPIPE
  // blocked, and writes made here (connecting) raise none (no_sigpipe.hpp).
  dist::ScopedSigpipeBlock no_sigpipe;
  if (config.store == nullptr || config.world_size < 1 || config.rank < 0 ||
      config.rank >= config.world_size || config.timeout_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo backend: bad communicator config (rank ", config.rank, " of ", config.world_size,
        ", timeout ", config.timeout_ms, " ms, store ", config.store ? "set" : "NULL",
        "); pass 0 <= rank < world_size, a positive timeout and a store"));
  }
  absl::StatusOr<AlgorithmPolicy> policy = AlgorithmPolicy::Parse(
      Setting(config, "gloo.allreduce_algorithm", "DIST_GLOO_ALLREDUCE_ALGORITHM"));
  if (!policy.ok()) return policy.status();
  // Synchronous pairs cost each rank two more descriptors per peer (the
  // socket and its duplicate, sync_mesh.h): on by default up to
  // kMaxAutoSyncRanks ranks, where that stays far below a default limit of
  // 1024 open files; "1" turns them on at any size, "0" off.
  const std::string sync_setting = Setting(config, "gloo.sync_pairs", "DIST_GLOO_SYNC_PAIRS");
  const bool sync_pairs =
      sync_setting == "1" || (sync_setting.empty() && config.world_size <= kMaxAutoSyncRanks);
  // The largest message this rank lets travel on them; the ranks use the
  // smallest that any of them allows (sync_limit.h).
  uint64_t sync_max_bytes = kMaxSyncMessageBytes;
  const std::string sync_max_setting =
      Setting(config, "gloo.sync_max_bytes", "DIST_GLOO_SYNC_MAX_BYTES");
  if (!sync_max_setting.empty() && !absl::SimpleAtoi(sync_max_setting, &sync_max_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo backend: gloo.sync_max_bytes (or DIST_GLOO_SYNC_MAX_BYTES) is '",
                     sync_max_setting, "'; give a number of bytes, e.g. 65536"));
  }
  // How long a rank polls a synchronous pair before it sleeps in Gloo's
  // read (peer_spin.h); 0 never polls.
  uint64_t spin_us = kDefaultSpinMicros;
  const std::string spin_setting = Setting(config, "gloo.spin_us", "DIST_GLOO_SPIN_US");
  if (!spin_setting.empty() && (!absl::SimpleAtoi(spin_setting, &spin_us) || spin_us > 100000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo backend: gloo.spin_us (or DIST_GLOO_SPIN_US) is '", spin_setting,
                     "'; give microseconds from 0 (never poll) to 100000, e.g. 50"));
  }

  const absl::Time start = absl::Now();
  if (device == nullptr) {
    std::string description;
    absl::StatusOr<std::shared_ptr<gloo::transport::Device>> created =
        CreateDevice(config, &description);
    if (!created.ok()) return created.status();
    device = LoopKicker::Create(*std::move(created));
    if (dist::LogEnabled(DIST_LOG_DEBUG))
      dist::Log(DIST_LOG_DEBUG, absl::StrCat("transport: ", description));
  }

  const std::chrono::milliseconds timeout(config.timeout_ms);
  auto context = std::make_shared<gloo::rendezvous::Context>(config.rank, config.world_size);
  // The connections keep this timeout for their bound-buffer waits (the
  // legacy algorithm classes, bound_algorithms.h): the Gloo timeout of an
  // operation with the communicator's timeout. Connecting waits 5x it.
  context->setTimeout(GlooWaitOf(timeout));
  const absl::Time connect_start = absl::Now();
  const std::string group = config.group_name ? config.group_name : "";
  auto creating = [&](absl::string_view what) {
    return absl::StrCat("gloo backend: creating group '", group, "' (rank ", config.rank, " of ",
                        config.world_size, "): ", what);
  };
  // Gloo's own connectFullMesh stays available ("gloo") for comparison.
  const bool gloo_connect = Setting(config, "gloo.connect", "DIST_GLOO_CONNECT") == "gloo";
  GlooStore store(config.store, absl::FromChrono(timeout));
  absl::Status connected;
  try {
    if (gloo_connect) {
      std::shared_ptr<gloo::transport::Device> gloo_device = device->device();
      context->connectFullMesh(store, gloo_device);
    } else {
      MeshOptions options;
      options.kicker = device.get();
      connected = ConnectFullMesh(*context, dist::StoreView(config.store), device->device(),
                                  absl::FromChrono(timeout), options);
    }
  } catch (const std::exception& e) {
    absl::Status store_error = store.first_error();
    connected = store_error.ok() ? absl::UnavailableError(e.what()) : store_error;
  }
  if (!connected.ok()) {
    if (absl::IsUnavailable(connected)) {
      return absl::UnavailableError(creating(absl::StrCat(
          "Gloo could not connect to every rank: ", connected.message(),
          "; check that all ranks run and can reach each other (DIST_GLOO_IFNAME picks the "
          "interface)")));
    }
    return absl::Status(connected.code(), creating(connected.message()));
  }
  EnlargeSendBuffers(*context, kPairSendBufferBytes);
  if (dist::LogEnabled(DIST_LOG_DEBUG)) {
    // Where start-up time goes (README.md, "Start-up").
    dist::Log(DIST_LOG_DEBUG,
              absl::StrCat("connected to ", config.world_size - 1, " ranks in ",
                           absl::FormatDuration(absl::Now() - connect_start), " (device ",
                           absl::FormatDuration(connect_start - start), ")"));
  }
  return std::shared_ptr<Communicator>(new Communicator(
      config, std::move(device), std::move(context), *policy, sync_pairs,
      static_cast<size_t>(sync_max_bytes), absl::Microseconds(static_cast<int64_t>(spin_us))));
}

Communicator::Communicator(const dist_comm_config_t& config, std::shared_ptr<LoopKicker> device,
                           std::shared_ptr<gloo::Context> context, AlgorithmPolicy policy,
                           bool sync_pairs, size_t sync_max_bytes, absl::Duration spin)
    : rank_(config.rank),
      size_(config.world_size),
      group_(config.group_name ? config.group_name : ""),
      timeout_(config.timeout_ms),
      store_(config.store),
      device_(std::move(device)),
      context_(std::move(context)),
      policy_(policy),
      pair_timeout_(GlooWaitOf(timeout_)),
      sync_(sync_pairs && size_ > 1
                ? std::make_unique<SyncMesh>(rank_, size_, store_, device_, pair_timeout_,
                                             kPairSendBufferBytes, sync_max_bytes)
                : nullptr),
      bound_(std::make_unique<BoundAlgorithms>(context_, sync_.get(), spin)) {
  peer_addresses_.resize(size_);
  for (int r = 0; r < size_; ++r) peer_addresses_[r] = PeerAddress(*context_, r);
  p2p_thread_ = std::thread([this] { P2pLoop(); });
}

Communicator::~Communicator() {
  Shutdown();
  // Closing each connected pair waits for the device thread's next turn
  // (loop_kicker.h); the members would close them in this order anyway.
  LoopKicker::Kick kick(device_.get());
  bound_.reset();
  sync_.reset();
  context_.reset();
}

absl::Status Communicator::AbortedStatus() const {
  absl::MutexLock lock(&mu_);
  if (abort_reason_.empty()) return absl::OkStatus();
  return absl::AbortedError(abort_reason_);
}

std::chrono::milliseconds Communicator::GlooTimeout(const Op& op) const {
  // Leave room to compare notes after a timeout, so that the whole error
  // still arrives within the operation's timeout.
  return GlooWaitOf(op.timeout);
}

absl::Duration Communicator::Grace(const Op& op) const { return GraceOf(op.timeout); }

std::optional<absl::Status> Communicator::SettledWithoutGloo(const Op& op) const {
  if (absl::Status aborted = AbortedStatus(); !aborted.ok()) return aborted;
  // Nothing to move, on every rank alike.
  if (op.counts != nullptr) {
    if (VariableSettled(op)) return absl::OkStatus();
  } else if (op.kind != DIST_COLL_BARRIER && OpCount(op.kind, op.args, size_) == 0) {
    return absl::OkStatus();
  }
  return std::nullopt;
}

absl::Status Communicator::RunCollective(const Op& op) {
  if (std::optional<absl::Status> settled = SettledWithoutGloo(op)) return *std::move(settled);
  dist::ScopedSigpipeBlock no_sigpipe;  // Gloo writes on this thread
  OpEnv env = EnvFor(op);
  const uint64_t sync_runs = bound_->sync_runs();
  absl::Status status;
  try {
    status = RunOn(op, env);
  } catch (const std::exception& e) {
    return Fail(op, e.what(), bound_->sync_runs() != sync_runs);
  } catch (...) {
    return Fail(op, "unknown exception from Gloo", bound_->sync_runs() != sync_runs);
  }
  // It ran on synchronous pairs only, where every failed write fails the
  // operation: none of its writes raised SIGPIPE.
  if (status.ok() && bound_->sync_runs() != sync_runs) no_sigpipe.NoWriteFailed();
  return status;
}

OpEnv Communicator::EnvFor(const Op& op) {
  OpEnv env{context_, GlooTimeout(op), &policy_, MatchTag(op, size_)};
  if (env.timeout == pair_timeout_ && bound_->usable()) env.bound = bound_.get();
  // Some of Gloo 0.5's algorithms wait with the transport's timeout instead
  // of the one in their options; operations run one at a time, so setting
  // it per operation is safe.
  if (context_->getTimeout() != env.timeout) SetTransportTimeout(*context_, env.timeout);
  return env;
}

// A posted send/recv as the runtime sees it: P2pLoop finishes it, so a
// waiter only sleeps until then (Gloo's device thread moves the bytes).
struct P2pDone {
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
};

class PostedInFlight : public dist::InFlight {
 public:
  explicit PostedInFlight(std::shared_ptr<P2pDone> done) : done_(std::move(done)) {}
  void Drive(absl::Time until) override {
    absl::MutexLock lock(&done_->mu);
    done_->mu.AwaitWithDeadline(absl::Condition(&done_->done), until);
  }

 private:
  std::shared_ptr<P2pDone> done_;
};

struct Communicator::PendingP2p {
  PostedP2p posted;
  Op op;
  dist::Transport::Finish finish;
  std::shared_ptr<P2pDone> done;
  std::chrono::steady_clock::time_point deadline;
};

absl::StatusOr<std::unique_ptr<dist::InFlight>> Communicator::Post(const Op& op,
                                                                   dist::Transport::Finish finish) {
  if (std::optional<absl::Status> settled = SettledWithoutGloo(op)) {
    if (!settled->ok()) return *std::move(settled);
    return std::unique_ptr<dist::InFlight>();  // nothing to move
  }
  dist::ScopedSigpipeBlock no_sigpipe;  // Gloo may write on this thread
  OpEnv env = EnvFor(op);
  try {
    auto done = std::make_shared<P2pDone>();
    PendingP2p pending{PostP2p(op, env), op, std::move(finish), done,
                       std::chrono::steady_clock::now() + env.timeout};
    absl::MutexLock lock(&mu_);
    p2p_.push_back(std::move(pending));
    return std::unique_ptr<dist::InFlight>(new PostedInFlight(std::move(done)));
  } catch (const std::exception& e) {
    return Fail(op, e.what());
  } catch (...) {
    return Fail(op, "unknown exception from Gloo");
  }
}

void Communicator::P2pLoop() {
  dist::BlockSigpipeInThisThread();
  for (;;) {
    PendingP2p pending;
    {
      absl::MutexLock lock(&mu_);
      // Stop only once the worker can post nothing more.
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !p2p_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (p2p_.empty()) return;
      pending = std::move(p2p_.front());
      p2p_.pop_front();
      p2p_waiting_ = true;
      p2p_current_ = &pending.posted;
      // Aborted while it was queued: its wait returns at once.
      if (!abort_reason_.empty()) InterruptWait(pending.posted);
    }
    absl::Status status;
    try {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          pending.deadline - std::chrono::steady_clock::now());
      if (left.count() < 1) left = std::chrono::milliseconds(1);
      const bool done = pending.posted.is_send ? pending.posted.buffer->waitSend(left)
                                               : pending.posted.buffer->waitRecv(left);
      if (!done) status = Fail(pending.op, "operation aborted");
    } catch (const std::exception& e) {
      status = Fail(pending.op, e.what());
    } catch (...) {
      status = Fail(pending.op, "unknown exception from Gloo");
    }
    {
      absl::MutexLock lock(&mu_);
      p2p_current_ = nullptr;  // before the buffer goes
    }
    pending.posted.buffer.reset();
    pending.finish(status);
    {
      absl::MutexLock lock(&pending.done->mu);
      pending.done->done = true;
    }
    absl::MutexLock lock(&mu_);
    p2p_waiting_ = false;
  }
}

absl::Status Communicator::Fail(const Op& op, const std::string& what, bool on_sync_pairs) {
  {
    absl::MutexLock lock(&mu_);
    if (!abort_reason_.empty()) return absl::AbortedError(abort_reason_);  // an abort caused this
  }
  // Gloo names the peer by the address its pair listened on, and those
  // sockets close once connected: the synchronous pairs, connected later,
  // can listen on a port the communicator's own pairs used, so one address
  // can name two ranks. The pairs the operation ran on are asked first.
  std::vector<std::string> sync_addresses;
  if (sync_ != nullptr) sync_addresses = sync_->PeerAddresses();
  const std::vector<std::string>& first = on_sync_pairs ? sync_addresses : peer_addresses_;
  const std::vector<std::string>& second = on_sync_pairs ? peer_addresses_ : sync_addresses;
  GlooFailure failure = ClassifyGlooError(what, first);
  if (failure.peer < 0 && !failure.timed_out && !second.empty()) {
    failure = ClassifyGlooError(what, second);
  }
  const std::string where =
      absl::StrCat(dist_collective_name(op.kind), op.counts != nullptr ? "_v" : "", " #", op.seq,
                   " on group '", group_, "' (rank ", rank_, " of ", size_, ")");
  const std::string report = absl::StrCat("rank ", rank_, " ", where, ": ", failure.Describe());
  // Most of the grace period, so that the error still arrives within the
  // operation's timeout.
  const std::string notes =
      CompareNotes(dist::StoreView(store_), rank_, size_, failure, report, Grace(op) * 0.8, [this] {
        absl::MutexLock lock(&mu_);
        return !abort_reason_.empty();
      });
  const std::string message =
      absl::StrCat("gloo backend: ", where, " failed: ", failure.Describe(), notes,
                   "; the communicator is aborted, create a new one to continue");
  dist::Log(DIST_LOG_ERROR, message);
  Abort(message);
  return absl::Status(failure.code, message);
}

void Communicator::Abort(const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (!abort_reason_.empty()) return;
    abort_reason_ = reason.empty() ? "gloo backend: communicator aborted" : reason;
    if (p2p_current_ != nullptr) InterruptWait(*p2p_current_);
  }
  // Wakes an operation blocked in Gloo (and the peers, whose connections
  // to this rank close).
  dist::ScopedSigpipeBlock no_sigpipe;
  LoopKicker::Kick kick(device_.get());  // closing a pair waits for the device thread
  FailAllPairs(*context_, abort_reason_);
  if (sync_ != nullptr) sync_->Abort(abort_reason_);
}

void Communicator::InterruptWait(PostedP2p& posted) {
  if (posted.buffer == nullptr) return;
  if (posted.is_send) {
    posted.buffer->abortWaitSend();
  } else {
    posted.buffer->abortWaitRecv();
  }
}

void Communicator::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !p2p_thread_.joinable()) return;
    auto drained = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return p2p_.empty() && !p2p_waiting_; };
    const bool done = mu_.AwaitWithTimeout(absl::Condition(&drained), absl::FromChrono(timeout_));
    stopping_ = true;
    if (!done) {
      mu_.Unlock();
      Abort(absl::StrCat("gloo backend: group '", group_,
                         "' destroyed with operations still pending after ", timeout_.count(),
                         " ms"));
      mu_.Lock();
    }
  }
  if (p2p_thread_.joinable()) p2p_thread_.join();
  bool healthy;
  {
    absl::MutexLock lock(&mu_);
    healthy = abort_reason_.empty();
  }
  // The legacy classes return before their last notifications are
  // written (bound_algorithms.h); closing the connections right away can
  // lose them (and reset the peers' connections while those still wait).
  // One unbound barrier, which waits for its own sends, settles them.
  if (healthy && bound_ != nullptr && bound_->used()) {
    dist::ScopedSigpipeBlock no_sigpipe;  // Gloo writes on the caller's thread here
    try {
      gloo::BarrierOptions opts(context_);
      opts.setTag(kShutdownTag);
      opts.setTimeout(std::min(pair_timeout_, kShutdownFlushBound));
      gloo::barrier(opts);
    } catch (...) {
      // A peer that is gone already has nothing left to lose.
    }
  }
}

}  // namespace dist_gloo

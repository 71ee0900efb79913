#include "comm.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "missing_ranks.h"
#include "mpi_status.h"
#include "progress.h"
#include "runtime.h"
#include "support/mpi_flavor.h"

namespace dist_mpi {
namespace {

std::atomic<size_t> g_total_pending{0};

bool IsCollective(dist_collective_t kind) {
  return kind != DIST_COLL_SEND && kind != DIST_COLL_RECV;
}

// How long rank r waits for the others to report a stuck collective.
absl::Duration DiagnosisGrace(absl::Duration timeout) {
  return std::clamp(timeout / 4, absl::Milliseconds(100), absl::Seconds(2));
}

// Polls `request` until done or the deadline; MPI has no bounded wait.
absl::Status PollUntil(MPI_Request* request, absl::Time deadline, const char* call,
                       bool* timed_out) {
  *timed_out = false;
  for (int polls = 0;; ++polls) {
    // After a short spin, let a peer that shares this core run: with more
    // ranks than cores (MPICH especially) spinning starves the very rank
    // this waits for.
    if (polls > 1000) sched_yield();
    int flag = 0;
    int rc;
    {
      MpiCallGuard guard;
      rc = MPI_Test(request, &flag, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) return MpiStatus(rc, call);
    if (flag) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      *timed_out = true;
      return absl::DeadlineExceededError(call);
    }
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<Comm>> Comm::CreateWorld(const dist_comm_config_t& config,
                                                        const CommOptions& options) {
  Runtime& runtime = Runtime::Get();
  int host_initialized = 0;
  MPI_Initialized(&host_initialized);
  if (config.world_size > 1 && !host_initialized && !Runtime::StartedByLauncher()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mpi: world size ", config.world_size,
        " requested but this process was not started by an MPI launcher (no "
        "OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK in its environment); the mpi backend "
        "takes its ranks from MPI: launch with `",
        dist_mpi_flavor::kLauncher, config.world_size, " <program>`",
        dist_mpi_flavor::kNeedsGlobalSymbols ? " (as root add --allow-run-as-root)" : "",
        ", or use the gloo "
        "backend (DIST_BACKEND=gloo)"));
  }
  if (absl::Status s = runtime.EnsureInitialized(); !s.ok()) return s;

  int mpi_rank = -1;
  int mpi_size = -1;
  {
    MpiCallGuard guard;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  }
  if (mpi_rank != config.rank || mpi_size != config.world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mpi: the init method says rank ", config.rank, " of ", config.world_size,
        " but MPI_COMM_WORLD says rank ", mpi_rank, " of ", mpi_size,
        "; start every rank with `mpirun -np N` and let rank and world size come from the "
        "launcher (env:// reads OMPI_COMM_WORLD_RANK/SIZE), or pass the same values"));
  }

  // The plugin's traffic gets a communicator of its own, so it never
  // matches the host's own MPI messages. idup, because a blocking dup would
  // hang on a rank that never comes.
  const absl::Duration timeout =
      absl::Milliseconds(config.timeout_ms > 0 ? config.timeout_ms : 300000);
  // A second duplicate carries the plugin's own point-to-point schedules.
  const absl::Time deadline = absl::Now() + timeout;
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm p2p = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Request p2p_request = MPI_REQUEST_NULL;
  {
    MpiCallGuard guard;
    int rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_idup(MPI_COMM_WORLD, &p2p, &p2p_request);
    if (rc != MPI_SUCCESS) return MpiStatus(rc, "MPI_Comm_idup");
  }
  bool timed_out = false;
  absl::Status polled = PollUntil(&request, deadline, "MPI_Comm_idup", &timed_out);
  // Every rank started both idups once the first completed anywhere.
  if (polled.ok()) polled = PollUntil(&p2p_request, deadline, "MPI_Comm_idup", &timed_out);
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        "mpi: creating group '", config.group_name ? config.group_name : "default", "' (rank ",
        mpi_rank, " of ", mpi_size, ") timed out after ", absl::FormatDuration(timeout), ": ",
        DescribeMissingRanks(config.store, "mpi/create/", mpi_rank, mpi_size,
                             DiagnosisGrace(timeout)),
        "; every rank must create the process group"));
  }
  if (!polled.ok()) return polled;
  {
    MpiCallGuard guard;
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(p2p, MPI_ERRORS_RETURN);
  }
  auto comm = std::make_shared<Comm>(dup, p2p, mpi_rank, mpi_size, config, options);
  ProgressEngine::Get().Register(comm);
  return comm;
}

Comm::Comm(MPI_Comm comm, MPI_Comm p2p_comm, int rank, int size, const dist_comm_config_t& config,
           const CommOptions& options)
    : comm_(comm),
      p2p_comm_(p2p_comm),
      rank_(rank),
      size_(size),
      name_(config.group_name ? config.group_name : "default"),
      timeout_(absl::Milliseconds(config.timeout_ms > 0 ? config.timeout_ms : 300000)),
      store_(config.store),
      options_(options) {}

absl::StatusOr<std::shared_ptr<Comm>> Comm::Split(const int32_t* ranks, size_t num_ranks,
                                                  const dist_comm_config_t& config) {
  // Member i of the child is ranks[i] (DIST_CAP_SPLIT_ORDERED): the key.
  const int32_t* me = std::find(ranks, ranks + num_ranks, rank_);
  const bool member = me != ranks + num_ranks;
  if (member && (config.rank < 0 || config.world_size != static_cast<int>(num_ranks))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mpi: comm_split on parent rank ", rank_, " (a member) got config rank ", config.rank,
        " of ", config.world_size, " for ", num_ranks, " ranks; the core must pass the new rank"));
  }
  // Every parent rank must be here before the blocking MPI_Comm_split, or it
  // would hang: a barrier with a deadline first.
  auto barrier = std::make_shared<PendingOp>();
  barrier->kind = DIST_COLL_BARRIER;
  barrier->timeout = timeout_;
  MPI_Comm parent = comm_;
  barrier->start = [parent](MPI_Request* request) { return MPI_Ibarrier(parent, request); };
  if (absl::Status s = Issue(barrier); !s.ok()) return s;
  if (absl::Status s = Await(*barrier, timeout_); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("mpi: comm_split of group '", name_,
                                               "' needs every parent rank: ", s.message()));
  }
  MPI_Comm child = MPI_COMM_NULL;
  {
    absl::MutexLock lock(&mu_);  // keeps the parent's issue order
    if (aborted_.load()) return AbortedError();
    MpiCallGuard guard;
    const int rc = MPI_Comm_split(comm_, member ? 0 : MPI_UNDEFINED,
                                  member ? static_cast<int>(me - ranks) : 0, &child);
    if (rc != MPI_SUCCESS) return MpiStatus(rc, "MPI_Comm_split");
  }
  if (!member) {
    if (child != MPI_COMM_NULL) {
      MpiCallGuard guard;
      MPI_Comm_free(&child);
    }
    return std::shared_ptr<Comm>();
  }
  int child_rank = -1;
  int child_size = -1;
  {
    MpiCallGuard guard;
    MPI_Comm_rank(child, &child_rank);
    MPI_Comm_size(child, &child_size);
    MPI_Comm_set_errhandler(child, MPI_ERRORS_RETURN);
  }
  if (child_rank != config.rank || child_size != config.world_size) {
    MpiCallGuard guard;
    MPI_Comm_free(&child);
    return absl::InternalError(absl::StrCat("mpi: MPI_Comm_split made rank ", child_rank, " of ",
                                            child_size, " but the core expects rank ", config.rank,
                                            " of ", config.world_size,
                                            "; member i of the child is ranks[i]"));
  }
  // The child's second communicator; every member got here right after
  // the split, so the deadline only guards against a rank dying meanwhile.
  MPI_Comm child_p2p = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  {
    MpiCallGuard guard;
    const int rc = MPI_Comm_idup(child, &child_p2p, &request);
    if (rc != MPI_SUCCESS) {
      MPI_Comm_free(&child);
      return MpiStatus(rc, "MPI_Comm_idup");
    }
  }
  bool timed_out = false;
  absl::Status polled = PollUntil(&request, absl::Now() + timeout_, "MPI_Comm_idup", &timed_out);
  if (!polled.ok()) {
    return absl::Status(polled.code(),
                        absl::StrCat("mpi: comm_split of group '", name_,
                                     "': duplicating the new communicator failed (",
                                     polled.message(), ") after ", absl::FormatDuration(timeout_),
                                     "; every member must stay until comm_split returns"));
  }
  {
    MpiCallGuard guard;
    MPI_Comm_set_errhandler(child_p2p, MPI_ERRORS_RETURN);
  }
  CommOptions options = options_;
  auto comm = std::make_shared<Comm>(child, child_p2p, child_rank, child_size, config, options);
  ProgressEngine::Get().Register(comm);
  return comm;
}

int Comm::StartLocked(PendingOp& op) {
  int rc;
  {
    MpiCallGuard guard;
    rc = op.schedule ? op.schedule->Start(P2pSchedule::TagFor(op.collective_seq))
                     : op.start(&op.request);
  }
  op.start = nullptr;
  op.started = true;
  return rc;
}

int Comm::TestStarted(PendingOp& op, int* flag) {
  MpiCallGuard guard;
  if (!op.schedule) return MPI_Test(&op.request, flag, &op.mpi_status);
  if (!op.schedule_done && op.schedule_rc == MPI_SUCCESS) {
    op.schedule_rc = op.schedule->Test(&op.schedule_done);
  }
  *flag = op.schedule_done ? 1 : 0;
  return op.schedule_rc;
}

void Comm::AdvanceSchedulesLocked() {
  // A libnbc request progresses inside any MPI call, but a schedule only
  // when it is tested. Testing only the oldest op could then deadlock: a
  // peer's oldest op may wait for this schedule's next step (e.g. its send
  // that had to wait for its own all_gather to finish).
  for (size_t i = 1; i < pending_.size(); ++i) {
    PendingOp& op = *pending_[i];
    if (!op.schedule || op.schedule_done) continue;
    int flag = 0;
    TestStarted(op, &flag);  // a failure is kept and reported in order
  }
}

absl::Status Comm::Issue(const std::shared_ptr<PendingOp>& op) {
  absl::MutexLock lock(&mu_);
  if (aborted_.load(std::memory_order_acquire)) return AbortedError();
  if (freed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("mpi: group '", name_, "' was destroyed; create a new one"));
  }
  op->issued = absl::Now();
  if (op->timeout <= absl::ZeroDuration()) op->timeout = timeout_;
  if (IsCollective(op->kind)) op->collective_seq = next_collective_seq_++;
  const int rc = StartLocked(*op);
  if (rc != MPI_SUCCESS) {
    if (IsCollective(op->kind)) --next_collective_seq_;
    return MpiStatus(rc, absl::StrCat("starting ", Describe(*op)));
  }
  pending_.push_back(op);
  pending_count_.fetch_add(1, std::memory_order_relaxed);
  g_total_pending.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

void Comm::SetOnDone(const std::shared_ptr<PendingOp>& op,
                     std::function<void(const absl::Status&)> on_done) {
  {
    absl::MutexLock lock(&mu_);
    if (!op->done.load(std::memory_order_acquire)) {
      op->on_done = std::move(on_done);
      return;
    }
  }
  on_done(op->status);
}

void Comm::Complete(PendingOp& op, absl::Status status, Finished* finished) {
  op.status = std::move(status);
  op.scratch.clear();
  op.scratch.shrink_to_fit();
  op.on_complete = nullptr;
  op.done.store(true, std::memory_order_release);
  if (op.on_done) finished->emplace_back(std::move(op.on_done), op.status);
  op.on_done = nullptr;
}

void Comm::ProgressLocked(Finished* finished) {
  // Only the oldest op is tested: one MPI_Test drives Open MPI's whole
  // progress engine, and completing front to back keeps issue order.
  while (!pending_.empty()) {
    AdvanceSchedulesLocked();
    PendingOp& op = *pending_.front();
    int flag = 0;
    const int rc = TestStarted(op, &flag);
    if (rc != MPI_SUCCESS) {
      Complete(op, MpiStatus(rc, Describe(op)), finished);
    } else if (!flag) {
      return;
    } else {
      absl::Status status;
      if (op.on_complete) status = op.on_complete(op.mpi_status);
      Complete(op, std::move(status), finished);
    }
    pending_.pop_front();
    pending_count_.fetch_sub(1, std::memory_order_relaxed);
    g_total_pending.fetch_sub(1, std::memory_order_relaxed);
  }
}

void Comm::Progress() {
  Finished finished;
  {
    absl::MutexLock lock(&mu_);
    ProgressLocked(&finished);
  }
  for (auto& [on_done, status] : finished) on_done(status);
}

bool Comm::Drive(PendingOp& op, absl::Time until) {
  // Done already (a send completed while the caller waited for a recv
  // issued after it): no MPI call, so no SIGPIPE block and its syscalls.
  if (op.done.load(std::memory_order_acquire)) return true;
  // One SIGPIPE block for the whole drive: the MPI calls' own (MpiCallGuard,
  // once per poll) then cost nothing.
  dist::ScopedSigpipeBlock no_sigpipe;
  const absl::Time start = absl::Now();
  waiters_.fetch_add(1, std::memory_order_relaxed);
  struct Leave {
    std::atomic<int>& waiters;
    ~Leave() { waiters.fetch_sub(1, std::memory_order_relaxed); }
  } leave{waiters_};
  for (uint32_t polls = 0;; ++polls) {
    if (op.done.load(std::memory_order_acquire)) return true;
    if (aborted_.load(std::memory_order_acquire)) return false;
    Progress();
    if (op.done.load(std::memory_order_acquire)) return true;
    // absl::Now costs ~20 ns; a poll costs more, so check every few polls.
    if ((polls & 15) == 15 || until <= start) {
      const absl::Time now = absl::Now();
      if (now >= until) return false;
      // Long waits (a late peer) need not burn a core that the peer may
      // need: yield after 10 ms, nap after 200 ms. Short ops never get here.
      const absl::Duration waited = now - start;
      if (waited > absl::Milliseconds(200)) {
        absl::SleepFor(absl::Microseconds(50));
      } else if (waited > absl::Milliseconds(10)) {
        std::this_thread::yield();
      }
    }
  }
}

absl::Status Comm::Await(PendingOp& op, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  if (Drive(op, start + timeout)) return op.status;
  if (aborted_.load(std::memory_order_acquire)) return AbortedError();
  return TimeoutError(op, absl::Now() - start);
}

Comm::Activity Comm::BackgroundProgress() {
  if (pending_count_.load(std::memory_order_relaxed) == 0) return Activity::kIdle;
  if (waiters_.load(std::memory_order_relaxed) > 0) return Activity::kAttended;
  if (!mu_.TryLock()) return Activity::kAttended;
  // A caller that issues and then waits leaves the op alone only for a
  // moment; polling then would just contend with it inside MPI. Only work
  // left alone for a while is the caller computing meanwhile.
  constexpr absl::Duration kUnattendedAfter = absl::Microseconds(200);
  Activity activity = Activity::kAttended;
  Finished finished;
  if (pending_.empty()) {
    activity = Activity::kIdle;
  } else if (absl::Now() - pending_.front()->issued >= kUnattendedAfter) {
    ProgressLocked(&finished);
    activity = Activity::kUnattended;
  }
  mu_.Unlock();
  for (auto& [on_done, status] : finished) on_done(status);
  return activity;
}

absl::Status Comm::AbortedError() const {
  // abort_reason_ is written once, before aborted_ is set.
  return absl::AbortedError(absl::StrCat("mpi: group '", name_, "' (rank ", rank_, " of ", size_,
                                         ") was aborted: ", abort_reason_,
                                         "; create a new process group"));
}

std::string Comm::Diagnose(PendingOp& op) {
  absl::MutexLock lock(&op.diagnosis_mu);
  if (op.diagnosed) return op.diagnosis;
  op.diagnosed = true;
  if (op.kind == DIST_COLL_SEND) {
    op.diagnosis = absl::StrCat("rank ", op.peer,
                                " has not received it (no matching recv with tag ", op.tag, ")");
  } else if (op.kind == DIST_COLL_RECV) {
    op.diagnosis =
        absl::StrCat("rank ", op.peer, " has not sent a matching message with tag ", op.tag);
  } else {
    op.diagnosis = DescribeMissingRanks(store_, absl::StrCat("mpi/stuck/", op.collective_seq, "/"),
                                        rank_, size_, DiagnosisGrace(op.timeout));
  }
  return op.diagnosis;
}

absl::Status Comm::TimeoutError(PendingOp& op, absl::Duration waited) {
  const absl::Duration age = absl::Now() - op.issued;
  if (age < op.timeout) {
    // Only the caller's wait ran out; the op is still within its timeout.
    return absl::DeadlineExceededError(absl::StrCat(
        "mpi: ", Describe(op), " still running after ", absl::FormatDuration(waited),
        " of waiting (issued ", absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(1))),
        " ago); wait again or with a longer timeout"));
  }
  return OverdueError(op);
}

absl::Status Comm::OverdueError(PendingOp& op) {
  return absl::DeadlineExceededError(
      absl::StrCat("mpi: ", Describe(op), " did not complete within ",
                   absl::FormatDuration(op.timeout), ": ", Diagnose(op),
                   "; MPI cannot cancel it, so abort the group (comm_abort) or raise the timeout "
                   "(DIST_TIMEOUT)"));
}

std::string Comm::Describe(const PendingOp& op) const {
  std::string what = dist_collective_name(op.kind);
  if (op.collective_seq > 0) absl::StrAppend(&what, " #", op.collective_seq);
  if (op.kind != DIST_COLL_BARRIER) {
    absl::StrAppend(&what, " (", dist_dtype_name(op.dtype), " x ", op.count, ")");
  }
  if (op.kind == DIST_COLL_SEND) absl::StrAppend(&what, " to rank ", op.peer, " tag ", op.tag);
  if (op.kind == DIST_COLL_RECV) absl::StrAppend(&what, " from rank ", op.peer, " tag ", op.tag);
  absl::StrAppend(&what, " on group '", name_, "' (rank ", rank_, " of ", size_, ")");
  return what;
}

void Comm::Abort(const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (aborted_.load()) return;
    abort_reason_ = reason.empty() ? "no reason given" : reason;
    aborted_.store(true, std::memory_order_release);
    // MPI still owns these requests (it cannot cancel collectives); they are
    // kept, never completed, so their buffers' owners learn of the abort.
    const absl::Status aborted = absl::AbortedError(absl::StrCat(
        "mpi: group '", name_, "' was aborted: ", abort_reason_, "; create a new process group"));
    Finished dropped;  // the runtime ends the works with its own status
    for (std::shared_ptr<PendingOp>& op : pending_) {
      Complete(*op, aborted, &dropped);
      abandoned_.push_back(std::move(op));
    }
    pending_count_.fetch_sub(pending_.size(), std::memory_order_relaxed);
    pending_.clear();
  }
  Runtime::Get().Log(DIST_LOG_WARN, absl::StrCat("group '", name_, "' aborted: ", reason));
  if (options_.abort_process) {
    Runtime::Get().Log(DIST_LOG_ERROR, "mpi.abort_process=1: calling MPI_Abort on the whole job");
    MPI_Abort(comm_, 1);
  }
}

void Comm::Destroy() {
  const absl::Time deadline = absl::Now() + timeout_;
  waiters_.fetch_add(1, std::memory_order_relaxed);
  while (pending_ops() > 0 && !aborted_.load() && absl::Now() < deadline) Progress();
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  ProgressEngine::Get().Unregister(this);
  absl::MutexLock lock(&mu_);
  // Ops abandoned by an abort may still finish inside MPI (the other ranks
  // can come late); give them a second so the communicator can be freed.
  const absl::Time drain_deadline = std::min(deadline, absl::Now() + absl::Seconds(1));
  while (!abandoned_.empty() && absl::Now() < drain_deadline) {
    for (auto it = abandoned_.begin(); it != abandoned_.end();) {
      int flag = 0;
      if (TestStarted(**it, &flag) != MPI_SUCCESS) flag = 1;
      if (flag) {
        it = abandoned_.erase(it);
        g_total_pending.fetch_sub(1, std::memory_order_relaxed);
      } else {
        ++it;
      }
    }
  }
  if (!pending_.empty() || !abandoned_.empty()) {
    // Freeing is allowed with requests pending, but those requests may still
    // write into buffers; keep the communicator and say so.
    Runtime::Get().Log(
        DIST_LOG_WARN,
        absl::StrCat("group '", name_, "' destroyed with ", pending_.size() + abandoned_.size(),
                     " operation(s) unfinished; its MPI communicator is kept"));
    freed_ = true;
    return;
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MpiCallGuard guard;
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    if (p2p_comm_ != MPI_COMM_NULL) MPI_Comm_free(&p2p_comm_);
  }
  freed_ = true;
}

size_t Comm::TotalPendingOps() { return g_total_pending.load(std::memory_order_relaxed); }

}  // namespace dist_mpi

#include "waiter.h"

#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "futex.h"
#include "process_identity.h"

namespace dist_shm {
namespace {

// How long one futex sleep lasts at most: the cadence of abort, state and
// deadline checks while a peer is late.
constexpr absl::Duration kSlice = absl::Milliseconds(10);
// Liveness checks read /proc, so they run less often, and only after the
// peer has already been late for a while.
constexpr absl::Duration kLivenessEvery = absl::Milliseconds(50);

std::string RankList(const std::vector<int>& ranks) { return absl::StrJoin(ranks, ", "); }

}  // namespace

void Waiter::Ring(int rank) {
  RankControl& target = segment_->rank(rank);
  // A sleeper that we see awake checks what it waits for after its own
  // fence, and so sees our update; one we see asleep (or about to sleep)
  // gets the bell changed under its futex word, and a wake-up.
  if (target.sleeping.load(std::memory_order_seq_cst) != 0) {
    target.bell.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&target.bell);
  }
}

void Waiter::Notify(int rank) {
  // Pairs with the sleeper's fence: either it sees our update before it
  // sleeps, or we see it sleeping and wake it.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  Ring(rank);
}

void Waiter::NotifyOthers() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int r = 0; r < segment_->world_size(); ++r) {
    if (r != rank_) Ring(r);
  }
}

absl::Status Waiter::AbortedError(const char* what) const {
  return absl::AbortedError(absl::StrCat("shm: ", what, " on group '", group_,
                                         "' failed: the communicator was aborted (",
                                         abort_->reason(), "); destroy it and create a new one"));
}

absl::Status Waiter::CheckPeers(const std::vector<int>& ranks, const OpContext& context,
                                bool check_liveness) {
  std::vector<int> dead;
  std::vector<std::string> pids;
  for (int r : ranks) {
    RankControl& peer = segment_->rank(r);
    const uint32_t state = peer.state.load(std::memory_order_acquire);
    if (state == kFailed || state == kAborted) {
      const std::string reason(peer.reason, strnlen(peer.reason, kReasonBytes));
      return absl::UnavailableError(
          absl::StrCat("shm: ", context.what, " on group '", group_, "' cannot finish: rank ", r,
                       state == kAborted ? " aborted its communicator (" : " failed (", reason,
                       "); destroy this communicator and restart the job's ranks"));
    }
    if (state == kLeft) {
      return absl::UnavailableError(
          absl::StrCat("shm: ", context.what, " on group '", group_, "' cannot finish: rank ", r,
                       " destroyed its communicator without taking part; every rank must issue "
                       "the same operations before destroying"));
    }
    if (check_liveness && state == kActive &&
        !IsAlive(ProcessIdentity{peer.pid, peer.start_time})) {
      dead.push_back(r);
      pids.push_back(absl::StrCat(peer.pid));
    }
  }
  if (!dead.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "shm: ", context.what, " on group '", group_, "' failed: rank",
        dead.size() > 1 ? "s " : " ", RankList(dead), " (pid ", absl::StrJoin(pids, ", "),
        ") died; the job lost a process: check that rank's output for why it "
        "exited, then restart the job"));
  }
  return absl::OkStatus();
}

bool Waiter::Spin(absl::FunctionRef<bool()> ready) {
  // Spin briefly: a peer that is a few microseconds behind is cheaper to
  // wait for here than through a sleep and a wake-up.
  // Adaptive: a spin that ends empty-handed halves the next one (down to a
  // sixteenth), one that succeeds doubles it back (up to spin_), so ranks
  // that keep missing each other stop burning the CPU.
  if (spin_now_ <= absl::ZeroDuration()) return false;
  // The clock starts at the first check (turn 64, or the first yield):
  // a peer a fraction of a microsecond behind costs no clock read.
  absl::Time spin_end = absl::InfiniteFuture();
  for (int i = 1;; ++i) {
    // Mostly pause; yield every few microseconds, so a peer waiting for
    // this CPU on a busy host gets it. (Yielding every 16 pauses cost a
    // syscall per call at 8 B: 2.5 us instead of 1.4 us at N = 2.)
    if (spin_yields_ || (i & 127) == 0) {
      sched_yield();
    } else {
      _mm_pause();
    }
    if (progress_) progress_();
    if (ready()) {
      spin_now_ = std::min(spin_, spin_now_ * 2);
      return true;
    }
    // A yield may hand the CPU away for a while: check the clock each time.
    if (spin_yields_ || (i & 63) == 0) {
      const absl::Time now = absl::Now();
      if (spin_end == absl::InfiniteFuture()) spin_end = now + spin_now_;
      if (now >= spin_end) break;
    }
  }
  spin_now_ = std::max(spin_ / 16, spin_now_ / 2);
  return false;
}

absl::Status Waiter::Wait(absl::FunctionRef<bool()> ready,
                          absl::FunctionRef<void(std::vector<int>*)> pending,
                          const OpContext& context) {
  if (ready() || Spin(ready)) return absl::OkStatus();
  RankControl& me = segment_->rank(rank_);
  std::vector<int> ranks;
  absl::Time next_liveness = absl::Now() + kLivenessEvery;
  while (true) {
    if (abort_->aborted()) return AbortedError(context.what);
    const uint32_t bell = me.bell.load(std::memory_order_acquire);
    me.sleeping.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const bool moved = progress_ && progress_();
    if (ready()) {
      me.sleeping.store(0, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    const absl::Time now = absl::Now();
    ranks.clear();
    pending(&ranks);
    const bool liveness = now >= next_liveness;
    if (liveness) next_liveness = now + kLivenessEvery;
    absl::Status peers = CheckPeers(ranks, context, liveness);
    if (!peers.ok() || now >= context.deadline) {
      me.sleeping.store(0, std::memory_order_relaxed);
      // A peer may have finished its part and then left or died.
      if (ready()) return absl::OkStatus();
      if (!peers.ok()) return peers;
      return absl::DeadlineExceededError(
          absl::StrCat("shm: ", context.what, " on group '", group_, "' timed out after ",
                       context.timeout_ms, " ms at rank ", rank_, " waiting for rank",
                       ranks.size() > 1 ? "s " : " ", RankList(ranks),
                       ", alive but not arriving; every rank must issue the same operations in "
                       "the same order (raise the timeout if they are merely slow)"));
    }
    if (!moved) FutexWait(&me.bell, bell, std::min(kSlice, context.deadline - now));
    me.sleeping.store(0, std::memory_order_relaxed);
  }
}

void Waiter::Idle(absl::FunctionRef<bool()> has_work) {
  RankControl& me = segment_->rank(rank_);
  const uint32_t bell = me.bell.load(std::memory_order_acquire);
  me.sleeping.store(1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool moved = progress_ && progress_();
  if (!moved && !has_work() && !abort_->aborted()) FutexWait(&me.bell, bell, kSlice);
  me.sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace dist_shm

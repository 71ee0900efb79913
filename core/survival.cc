#include "core/survival.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/logging.h"
#include "dist/cpp/status.hpp"

namespace dist {
namespace {

// Store keys, under the group's survival namespace.
constexpr char kRevokedKey[] = "revoked";
std::string HeartbeatKey(int32_t rank) { return absl::StrCat("hb/", rank); }
std::string JoinedKey(int epoch, int32_t rank) {
  return absl::StrCat("shrink", epoch, "/joined/", rank);
}
std::string DecisionKey(int epoch) { return absl::StrCat("shrink", epoch, "/survivors"); }

// How long a store call of the monitor may take before it counts as failed
// (the store itself is down: nothing else can be done then).
constexpr absl::Duration kStoreCall = absl::Seconds(5);

}  // namespace

bool Revocation::Revoke(const std::string& message) {
  absl::MutexLock lock(&mu_);
  if (revoked_.load(std::memory_order_relaxed)) return false;
  message_ = message;
  revoked_.store(true, std::memory_order_release);
  return true;
}

void Revocation::SetPoll(std::function<void()> poll) {
  absl::MutexLock lock(&poll_mu_);
  poll_ = std::move(poll);
}

void Revocation::Poll() {
  if (revoked()) return;
  absl::MutexLock lock(&poll_mu_);
  if (poll_ != nullptr) poll_();
}

absl::Status Revocation::status() const {
  if (!revoked()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return RevokedError(message_);
}

SurvivalMonitor::SurvivalMonitor(dist_store_t* store, int32_t rank, int32_t world_size,
                                 std::string group, SurvivalSettings settings, OnRevoked on_revoked)
    : raw_store_(store),
      store_(store),
      rank_(rank),
      world_size_(world_size),
      group_(std::move(group)),
      settings_(settings),
      on_revoked_(std::move(on_revoked)),
      seen_(static_cast<size_t>(world_size), Seen{"", absl::Now()}),
      heartbeat_thread_([this] { HeartbeatLoop(); }),
      thread_([this] { Loop(); }) {}

SurvivalMonitor::~SurvivalMonitor() {
  stop_.Notify();
  thread_.join();
  heartbeat_thread_.join();
  raw_store_->release(raw_store_->ctx);
}

// Its own thread, so that a slow turn of the watch (a store under load)
// never delays this rank's heartbeat into looking dead to the others.
void SurvivalMonitor::HeartbeatLoop() {
  while (!stop_.HasBeenNotified()) {
    Heartbeat();
    stop_.WaitForNotificationWithTimeout(settings_.heartbeat);
  }
}

void SurvivalMonitor::Loop() {
  absl::Time last_turn = absl::Now();
  while (!stop_.HasBeenNotified()) {
    const absl::Time now = absl::Now();
    if (now - last_turn > settings_.failure_after / 2) {
      // This watcher itself was held up (no CPU, a slow store): what it did
      // not see meanwhile is no evidence against the peers; their clocks
      // start again now.
      absl::MutexLock lock(&mu_);
      for (Seen& seen : seen_) seen.changed = now;
    }
    last_turn = now;
    WatchRevoke();
    WatchPeers(now);
    stop_.WaitForNotificationWithTimeout(settings_.heartbeat);
  }
}

void SurvivalMonitor::Heartbeat() {
  store_.Set(HeartbeatKey(rank_), absl::StrCat(++beats_)).IgnoreError();
}

void SurvivalMonitor::WatchRevoke() {
  {
    absl::MutexLock lock(&mu_);
    if (revoked_) return;
  }
  absl::StatusOr<bool> exists = store_.Check({kRevokedKey});
  if (!exists.ok() || !*exists) return;
  absl::StatusOr<std::string> record = store_.Get(kRevokedKey, kStoreCall);
  if (record.ok()) Apply(*record);
}

void SurvivalMonitor::WatchPeers(absl::Time now) {
  std::vector<int32_t> silent;
  for (int32_t peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_ || IsFailed(peer)) continue;
    // A missing key (not started yet) reads as "": the clock runs from the
    // monitor's start.
    absl::StatusOr<std::string> value = store_.Get(HeartbeatKey(peer), absl::Milliseconds(1));
    if (!value.ok() && value.status().code() != absl::StatusCode::kDeadlineExceeded) {
      // The store itself fails: that says nothing about the peers, and
      // nothing can be agreed without it.
      if (store_failing_since_ == absl::InfiniteFuture()) store_failing_since_ = now;
      if (now - store_failing_since_ > settings_.failure_after) {
        Revoke(absl::StrCat("the store stopped answering (", value.status().message(),
                            "); survival needs a store that outlives every rank: file://, "
                            "distrun (it hosts the store), or a dist_store_server with ?external=1 "
                            "(docs/survival.md)"));
      }
      return;
    }
    store_failing_since_ = absl::InfiniteFuture();
    absl::MutexLock lock(&mu_);
    Seen& seen = seen_[peer];
    if (value.ok() && *value != seen.value) {
      seen.value = *value;
      seen.changed = now;
    } else if (now - seen.changed > settings_.failure_after) {
      Declare(peer, absl::StrCat("rank ", peer, " stopped answering: no heartbeat for ",
                                 absl::FormatDuration(now - seen.changed)));
      silent.push_back(peer);
    }
  }
  if (!silent.empty()) {
    Revoke(absl::StrCat(silent.size() == 1 ? "rank " : "ranks ", absl::StrJoin(silent, ", "),
                        " failed (no heartbeat for ", absl::FormatDuration(settings_.failure_after),
                        ")"));
  }
}

void SurvivalMonitor::Declare(int32_t rank, std::string reason) {
  if (failed_.emplace(rank, reason).second) {
    LogLine(DIST_LOG_WARN, "core", absl::StrCat("group '", group_, "': ", reason));
  }
}

bool SurvivalMonitor::IsFailed(int32_t rank) const {
  absl::MutexLock lock(&mu_);
  return failed_.count(rank) > 0;
}

void SurvivalMonitor::Revoke(const std::string& reason) {
  const std::string record = absl::StrCat(rank_, "\n", reason);
  absl::StatusOr<std::string> stored = store_.CompareSet(kRevokedKey, "", record);
  // The first revoke in the store is the one every rank reports; without
  // the store this rank still revokes itself.
  Apply(stored.ok() && !stored->empty() ? *stored : record);
}

void SurvivalMonitor::Apply(const std::string& record) {
  {
    absl::MutexLock lock(&mu_);
    if (revoked_) return;
    revoked_ = true;
  }
  std::pair<std::string, std::string> parts = absl::StrSplit(record, absl::MaxSplits('\n', 1));
  on_revoked_(absl::StrCat("group '", group_, "' was revoked by rank ", parts.first, ": ",
                           parts.second, "; survivors go on with dist_shrink"));
}

std::vector<FailedRank> SurvivalMonitor::Failed() const {
  absl::MutexLock lock(&mu_);
  std::vector<FailedRank> failed;
  for (const auto& [rank, reason] : failed_) failed.push_back({rank, reason});
  return failed;
}

absl::StatusOr<std::vector<int32_t>> SurvivalMonitor::AgreeOnSurvivors(int epoch,
                                                                       absl::Duration timeout) {
  absl::StatusOr<std::vector<int32_t>> survivors = Agree(epoch, timeout);
  const absl::StatusCode code = survivors.status().code();
  if (survivors.ok() || code == absl::StatusCode::kFailedPrecondition ||
      code == absl::StatusCode::kDeadlineExceeded) {
    return survivors;
  }
  return absl::Status(code,
                      absl::StrCat("dist_shrink on group '", group_, "': the store failed (",
                                   survivors.status().message(),
                                   "); survival needs a store that outlives every rank: "
                                   "file://, distrun (it hosts the store), or a dist_store_server "
                                   "with ?external=1 "
                                   "(docs/survival.md)"));
}

absl::StatusOr<std::vector<int32_t>> SurvivalMonitor::Agree(int epoch, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  DIST_RETURN_IF_ERROR(store_.Set(JoinedKey(epoch, rank_), "1"));
  std::vector<int32_t> joined;
  for (;;) {
    absl::StatusOr<std::string> decided = store_.Get(DecisionKey(epoch), absl::Milliseconds(1));
    if (decided.ok()) break;  // another survivor decided: take its answer
    joined.clear();
    bool everyone_known = true;
    for (int32_t r = 0; r < world_size_; ++r) {
      absl::StatusOr<bool> in = r == rank_ ? true : store_.Check({JoinedKey(epoch, r)});
      if (!in.ok()) return in.status();
      if (*in && !IsFailed(r)) {
        joined.push_back(r);
      } else if (!*in && !IsFailed(r)) {
        everyone_known = false;
      }
    }
    if (everyone_known) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "dist_shrink on group '", group_, "': within ", absl::FormatDuration(timeout),
          " not every rank either joined the shrink or was declared failed (joined: ",
          absl::StrJoin(joined, ","), "); call dist_shrink on every surviving rank"));
    }
    absl::SleepFor(std::min(settings_.heartbeat / 4, absl::Milliseconds(20)));
  }
  // The first proposal written is everyone's answer.
  absl::StatusOr<std::string> decision =
      store_.CompareSet(DecisionKey(epoch), "", absl::StrJoin(joined, ","));
  if (!decision.ok()) return decision.status();
  std::vector<int32_t> survivors;
  for (absl::string_view part : absl::StrSplit(*decision, ',', absl::SkipEmpty())) {
    int32_t r = 0;
    // Ascending ranks of this group, each once: anything else did not come
    // from a survivor, and must not reach the new group's set-up.
    if (!absl::SimpleAtoi(part, &r) || r < 0 || r >= world_size_ ||
        (!survivors.empty() && r <= survivors.back())) {
      return absl::DataLossError(absl::StrCat("dist_shrink on group '", group_,
                                              "': the survivors' record in the store is garbled: '",
                                              *decision, "'"));
    }
    survivors.push_back(r);
  }
  if (std::find(survivors.begin(), survivors.end(), rank_) == survivors.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dist_shrink on group '", group_, "': this rank (", rank_,
                     ") was declared failed by the survivors [", *decision,
                     "], which went on without it; this process should exit"));
  }
  absl::MutexLock lock(&mu_);
  for (int32_t r = 0; r < world_size_; ++r) {
    if (std::find(survivors.begin(), survivors.end(), r) == survivors.end()) {
      Declare(r, absl::StrCat("rank ", r, " was left out by the survivors' shrink"));
    }
  }
  return survivors;
}

}  // namespace dist

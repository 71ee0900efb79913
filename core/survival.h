// Surviving a failed rank (dist.h 1.3): the revoked state of a group, and
// the monitor that heartbeats, notices silent ranks, spreads a revoke to
// every rank and runs the survivors' agreement for dist_shrink, all through
// the group's namespace in the store (docs/survival.md).
#ifndef DIST_CORE_SURVIVAL_H_
#define DIST_CORE_SURVIVAL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"
#include "dist/store.h"

namespace dist {

// Resolved with the other settings (config.h: DIST_SURVIVAL,
// DIST_FAILURE_DETECT_MS and their options).
struct SurvivalSettings {
  bool enabled = false;
  // A rank whose heartbeat has not changed for this long is declared failed.
  absl::Duration failure_after = absl::Milliseconds(500);
  absl::Duration heartbeat = absl::Milliseconds(100);  // failure_after / 5
};

// Whether a group is revoked, and why; shared with its work handles.
class Revocation {
 public:
  // The first message wins; returns whether this call revoked.
  bool Revoke(const std::string& message);
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // DIST_REVOKED with the message once revoked, else OK.
  absl::Status status() const;

  // How to ask the store for a revoke record now: set by the group's
  // monitor while it runs, cleared (nullptr) before it stops; clearing
  // waits for a Poll in progress. Work handles share this object and may
  // outlive the group.
  void SetPoll(std::function<void()> poll);
  // Asks, where a monitor runs. A failed operation asks before it reports:
  // a revoking rank writes the record before its connections close, so
  // its peers' failures are the revoke, not a lost peer.
  void Poll();

 private:
  std::atomic<bool> revoked_{false};
  mutable absl::Mutex mu_;
  std::string message_ ABSL_GUARDED_BY(mu_);
  absl::Mutex poll_mu_;  // held during a poll: a store call, apart from mu_
  std::function<void()> poll_ ABSL_GUARDED_BY(poll_mu_);
};

struct FailedRank {
  int32_t rank;
  std::string reason;
};

class SurvivalMonitor {
 public:
  // Called once, from the monitor's thread or a revoking caller, with the
  // message every operation of the group fails with from then on.
  using OnRevoked = std::function<void(const std::string& message)>;

  // `store`: this group's survival namespace, owned (released at the end).
  SurvivalMonitor(dist_store_t* store, int32_t rank, int32_t world_size, std::string group,
                  SurvivalSettings settings, OnRevoked on_revoked);
  ~SurvivalMonitor();
  SurvivalMonitor(const SurvivalMonitor&) = delete;
  SurvivalMonitor& operator=(const SurvivalMonitor&) = delete;

  // Publishes a revoke by this rank (the first one in the store wins, on
  // every rank) and applies it here at once.
  void Revoke(const std::string& reason);

  // Reads the store's revoke record now and applies it if there is one:
  // a failed operation asks before it reports, since a revoking rank
  // writes the record before its connections close.
  void PollRevoke() { WatchRevoke(); }

  // The ranks known to have failed, ascending.
  std::vector<FailedRank> Failed() const;

  // Shrink number `epoch`: waits until every rank has either joined the
  // agreement or is declared failed, then the first proposal written wins
  // (compare-and-set in the store). The survivors, ascending; FAILED_PRECONDITION
  // when this rank is not among them.
  absl::StatusOr<std::vector<int32_t>> AgreeOnSurvivors(int epoch, absl::Duration timeout);

 private:
  // AgreeOnSurvivors without its explanation of store errors.
  absl::StatusOr<std::vector<int32_t>> Agree(int epoch, absl::Duration timeout);
  void Loop();
  void HeartbeatLoop();
  void Heartbeat();
  void WatchPeers(absl::Time now);
  void WatchRevoke();
  // Applies a revoke read from the store ("<rank>\n<reason>").
  void Apply(const std::string& record);
  void Declare(int32_t rank, std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsFailed(int32_t rank) const;

  dist_store_t* const raw_store_;
  const StoreView store_;
  const int32_t rank_;
  const int32_t world_size_;
  const std::string group_;
  const SurvivalSettings settings_;
  const OnRevoked on_revoked_;

  mutable absl::Mutex mu_;
  std::map<int32_t, std::string> failed_ ABSL_GUARDED_BY(mu_);
  struct Seen {
    std::string value;
    absl::Time changed;
  };
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
  bool revoked_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t beats_ = 0;                                       // the heartbeat thread's
  absl::Time store_failing_since_ = absl::InfiniteFuture();  // the monitor thread's

  absl::Notification stop_;
  // Last: they start once the members above exist.
  std::thread heartbeat_thread_;
  std::thread thread_;
};

}  // namespace dist

#endif  // DIST_CORE_SURVIVAL_H_

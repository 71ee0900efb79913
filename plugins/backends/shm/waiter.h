// Waiting on peers: a short spin, then futex sleeps in slices during which
// the waiter checks for abort, the deadline, peers that failed, left or died.
// Every wait is bounded by the operation's deadline.
#ifndef DIST_PLUGINS_BACKENDS_SHM_WAITER_H_
#define DIST_PLUGINS_BACKENDS_SHM_WAITER_H_

#include <functional>
#include <string>
#include <vector>

#include "abort_state.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dist/cpp/coarse_clock.hpp"
#include "segment.h"

namespace dist_shm {

// The coarse clock of deadlines (dist/cpp/coarse_clock.hpp).
using dist::CoarseDeadline;
using dist::CoarseNow;

// The operation a wait belongs to, for deadlines and messages.
struct OpContext {
  const char* what = "";  // "all_reduce"
  absl::Time deadline;
  int64_t timeout_ms = 0;
};

class Waiter {
 public:
  // spin_yields: yield the CPU at every turn of the spin (Tuning).
  Waiter(Segment* segment, int rank, std::string group, const AbortState* abort,
         absl::Duration spin, bool spin_yields)
      : segment_(segment),
        rank_(rank),
        group_(std::move(group)),
        abort_(abort),
        spin_(spin),
        spin_now_(spin),
        spin_yields_(spin_yields) {}

  // Returns OK once ready() holds. pending(out) lists the ranks it still
  // waits for; they are the ones checked for failure and named in errors.
  absl::Status Wait(absl::FunctionRef<bool()> ready,
                    absl::FunctionRef<void(std::vector<int>*)> pending, const OpContext& context);

  // Wait's spin alone: true as soon as ready() holds, false once the
  // spin's time is up (adapting it as Wait does). Never sleeps, and takes
  // at most the spin's time (Tuning::spin), so a caller can try a fast path
  // and fall back to a full wait.
  bool Spin(absl::FunctionRef<bool()> ready);

  // The worker's wait for new operations while send/recv are pending: runs
  // progress, then sleeps one slice unless something moved or has_work().
  void Idle(absl::FunctionRef<bool()> has_work);

  // Wakes `rank` if it sleeps (call after publishing what it waits for).
  void Notify(int rank);
  // Wakes every other rank. The fence it starts with waits until this
  // rank's stores have left its store buffer, which takes a cross-core
  // transfer when a peer holds the lines: a barrier calls it after its own
  // wait (see Collectives::Step), when that has long happened.
  void NotifyOthers();
  // Wakes this rank's own waiter (abort from another thread).
  void NotifySelf() { Notify(rank_); }

  // The error for an aborted communicator.
  absl::Status AbortedError(const char* what) const;

  // Fails if one of `ranks` failed, aborted, left or (check_liveness) died.
  absl::Status CheckPeers(const std::vector<int>& ranks, const OpContext& context,
                          bool check_liveness);

  // Called while waiting, so pending send/recv keep moving (worker only);
  // returns true when it moved something.
  void set_progress(std::function<bool()> progress) { progress_ = std::move(progress); }

  const std::string& group() const { return group_; }

 private:
  // Notify's check of one rank, after the caller's fence.
  void Ring(int rank);

  Segment* segment_;
  int rank_;
  std::string group_;
  const AbortState* abort_;
  absl::Duration spin_;      // the most a wait spins
  absl::Duration spin_now_;  // what it spins now: halves after a spin that
                             // found nothing, doubles after one that did
  bool spin_yields_;
  std::function<bool()> progress_;
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_WAITER_H_

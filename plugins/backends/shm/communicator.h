// One rank's part of a shm communicator: the segment, its collectives and
// its send/recv engine. The SDK runtime (dist/cpp/runtime.hpp, through
// plugin.cc's ShmTransport) owns issue order, work handles, abort and
// revoke; this class runs what it hands over.
//
// Threads: the runtime runs one collective or start at a time, in issue
// order (the caller's thread or its worker). Send/recv left in flight are
// moved by whoever waits for one of them (Drive), and by a collective's
// waits meanwhile; the engine lock keeps them apart, and the end of each is
// reported after that lock is let go.
#ifndef DIST_PLUGINS_BACKENDS_SHM_COMMUNICATOR_H_
#define DIST_PLUGINS_BACKENDS_SHM_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "abort_state.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bootstrap.h"
#include "collectives.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/in_flight.hpp"
#include "dist/cpp/runtime.hpp"
#include "point_to_point.h"
#include "segment.h"
#include "single_copy.h"
#include "waiter.h"

namespace dist_shm {

class Communicator {
 public:
  // Collective over the config's ranks.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(const dist_comm_config_t& config);
  // Tells the peers that this rank left.
  ~Communicator();

  // A collective to its end, on the runtime's turn. A failure that leaves
  // the ranks out of step revokes the communicator (`ctx`).
  absl::Status RunCollective(const dist::Op& op, dist::OpContext& ctx);
  // The fast path of send/recv: the whole message straight into its ring,
  // or straight out of the peer's (within a spin when `spin`), with no
  // record or callback. Each returns whether it did; if not, nothing was
  // consumed and the operation is to be posted (Post).
  bool SendNow(const dist_op_args_t& send);
  bool ReceiveNow(const dist_op_args_t& recv, bool spin);
  // Posts a send or recv to the engine; `finish` runs once it ends, from
  // whichever thread moves it then, outside the engine lock.
  std::unique_ptr<dist::InFlight> Post(const dist::Op& op, dist::OpContext& ctx,
                                       dist::Transport::Finish finish);
  // The runtime's revoke: waits end, the engine lets go of every posted
  // operation, and the peers learn why (an abort, or this rank's failure).
  void Interrupt(const absl::Status& why);

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

 private:
  class Posted;
  // A posted operation's end, waiting for the engine lock to be let go.
  struct Ended {
    dist::Transport::Finish finish;
    absl::Status status;
    dist::OpContext* revoke;  // set: the failure revokes the communicator
  };

  Communicator(const dist_comm_config_t& config, std::unique_ptr<Segment> segment,
               std::unique_ptr<PeerReader> reader, const Tuning& tuning);
  // Moves the posted send/recv one turn, if any are posted; `wait` for the
  // engine lock, or skip the turn when another thread holds it. Returns
  // whether bytes moved.
  bool MoveSendRecv(bool wait);
  // Reports what ended while the engine lock was held (Ended), in order.
  void ReportEnded(std::vector<Ended> ended);
  // Moves send/recv until `done` or `until` (Posted::Drive).
  void Drive(const std::atomic<bool>& done, absl::Time until);
  // Whether `status` leaves the ranks out of step: then the communicator
  // is failed for good (a mismatch is found by every rank at the same step
  // and leaves the segment consistent).
  static bool Breaks(const absl::Status& status);
  // A failure that leaves the ranks out of step: logged, published to the
  // peers, and the communicator revoked.
  void Fail(const absl::Status& status, dist::OpContext& ctx);
  // The status every later operation gets once `status` broke it.
  absl::Status FailedEarlier(const absl::Status& status) const;
  // The operation's timeout: its own, else the communicator's.
  int64_t TimeoutMs(const dist_op_args_t& args) const;
  // Name and deadline (from now) of an operation about to run.
  OpContext ContextFor(const char* what, const dist_op_args_t& args) const;
  // Tells the peers this rank's state (kFailed, kAborted, kLeft).
  void Publish(RankState state, const std::string& reason);
  void Log(dist_log_level_t level, const std::string& message) const;

  const int rank_;
  const int world_size_;
  const std::string group_;
  const int64_t timeout_ms_;
  std::unique_ptr<Segment> segment_;
  std::unique_ptr<PeerReader> reader_;
  AbortState abort_;
  Waiter waiter_;  // the runtime's turn: collectives
  Collectives collectives_;

  absl::Mutex publish_mu_;  // serializes writes of this rank's state/reason

  // The engine: posted send/recv. Its waits have their own waiter (a
  // Waiter adapts its spin as it goes, so it is one thread's at a time),
  // and one thread at a time drives (driver_mu_).
  absl::Mutex driver_mu_;
  Waiter driver_waiter_ ABSL_GUARDED_BY(driver_mu_);
  absl::Mutex engine_mu_ ABSL_ACQUIRED_AFTER(driver_mu_);
  PointToPoint p2p_ ABSL_GUARDED_BY(engine_mu_);
  std::vector<Ended> ended_ ABSL_GUARDED_BY(engine_mu_);
  // Whether p2p_ holds posted operations; read without the lock, so a
  // collective's wait costs nothing when none are.
  std::atomic<bool> engine_busy_{false};
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_COMMUNICATOR_H_

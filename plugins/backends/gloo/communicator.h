// One Gloo communicator's transport: a Gloo context over TCP and the
// synchronous pairs, the collectives, the posted send/recv and the thread
// that waits for them, and the failure logic. The SDK runtime above it
// (dist/cpp/runtime.hpp, plugin.cc) owns issue order, work handles,
// deadlines, abort and revoke: it runs one collective at a time, on the
// caller's thread when it can, and leaves send/recv in flight here.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_COMMUNICATOR_H_
#define DIST_PLUGINS_BACKENDS_GLOO_COMMUNICATOR_H_

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/runtime.hpp"
#include "gloo/context.h"
#include "gloo/transport/device.h"
#include "plugins/backends/gloo/algorithm.h"
#include "plugins/backends/gloo/bound_algorithms.h"
#include "plugins/backends/gloo/loop_kicker.h"
#include "plugins/backends/gloo/op.h"
#include "plugins/backends/gloo/sync_mesh.h"

namespace dist_gloo {

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  // Collective over every rank of `config`. `device` (the device and its
  // kicker) is the parent's for a subgroup, or null to open one.
  static absl::StatusOr<std::shared_ptr<Communicator>> Create(const dist_comm_config_t& config,
                                                              std::shared_ptr<LoopKicker> device);

  ~Communicator();

  // Runs one collective (with counts: a variable-count one) to its end on
  // this thread; a failure aborts the communicator (then AbortedStatus).
  absl::Status RunCollective(const Op& op);

  // Posts a send or recv; `finish` gets its status from the thread that
  // waits for posted operations (P2pLoop), in the order they were posted.
  // An error: it was not posted and `finish` is never called.
  absl::StatusOr<std::unique_ptr<dist::InFlight>> Post(const Op& op,
                                                       dist::Transport::Finish finish);

  // Fails every pending and future operation with `reason`. Idempotent:
  // the first reason stays.
  void Abort(const std::string& reason);
  // ABORTED with the reason; OK while healthy.
  absl::Status AbortedStatus() const;

  // Waits for posted send/recv (up to the timeout), aborts what is left,
  // and stops the thread. Called once, when the runtime lets go.
  void Shutdown();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::shared_ptr<LoopKicker>& device() const { return device_; }
  std::chrono::milliseconds OpTimeout(const dist_op_args_t& args) const {
    return std::chrono::milliseconds(args.timeout_ms > 0 ? args.timeout_ms : timeout_.count());
  }

 private:
  struct PendingP2p;

  Communicator(const dist_comm_config_t& config, std::shared_ptr<LoopKicker> device,
               std::shared_ptr<gloo::Context> context, AlgorithmPolicy policy, bool sync_pairs,
               size_t sync_max_bytes, absl::Duration spin);

  void P2pLoop();
  // The status of an operation that needs no Gloo call (the communicator
  // is aborted, or there is nothing to move), else nullopt.
  std::optional<absl::Status> SettledWithoutGloo(const Op& op) const;
  // Makes P2pLoop's wait on `posted` return at once (Gloo's abortWait*).
  void InterruptWait(PostedP2p& posted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the operation runs with (and the transport's timeout set for it).
  OpEnv EnvFor(const Op& op);
  // Turns a Gloo exception into the operation's error and aborts;
  // `on_sync_pairs`: the operation ran on the SyncMesh's pairs.
  absl::Status Fail(const Op& op, const std::string& what, bool on_sync_pairs = false);
  std::chrono::milliseconds GlooTimeout(const Op& op) const;
  absl::Duration Grace(const Op& op) const;

  const int rank_;
  const int size_;
  const std::string group_;
  const std::chrono::milliseconds timeout_;
  const dist_store_t* store_;
  // Gloo's device, kicked while pairs close (abort, destroy); shared with
  // subgroups and the synchronous pairs (loop_kicker.h).
  std::shared_ptr<LoopKicker> device_;
  std::shared_ptr<gloo::Context> context_;
  std::vector<std::string> peer_addresses_;
  const AlgorithmPolicy policy_;
  // The timeout every connection waits with (set when they were made): the
  // Gloo timeout of an operation with the communicator's timeout.
  const std::chrono::milliseconds pair_timeout_;
  // The synchronous pairs for small messages (sync_mesh.h); null when
  // turned off (gloo.sync_pairs=0).
  std::unique_ptr<SyncMesh> sync_;
  // Only the thread running a collective (one at a time) touches it.
  std::unique_ptr<BoundAlgorithms> bound_;

  mutable absl::Mutex mu_;
  std::deque<PendingP2p> p2p_ ABSL_GUARDED_BY(mu_);
  bool p2p_waiting_ ABSL_GUARDED_BY(mu_) = false;
  // The posted send/recv P2pLoop waits on, for Abort to interrupt: a failed
  // pair does not reach a recv whose sender had already announced itself.
  PostedP2p* p2p_current_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);  // "" while healthy

  std::thread p2p_thread_;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_COMMUNICATOR_H_

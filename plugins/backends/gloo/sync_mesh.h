// A second Gloo context, over the communicator's device, whose pairs are in
// Gloo's synchronous mode: the legacy algorithm classes run on it for small
// messages (bound_algorithms.h).
//
// Why: in Gloo's default (asynchronous) mode a message is read by the
// device's loop thread, which then wakes the waiting caller: two thread
// wake-ups per message. A synchronous pair is read by the waiting thread
// itself, in a blocking recv that the pair's timeout bounds (SO_RCVTIMEO):
// one wake-up. Raw AllreduceRing, 8 B, on this 2-core VM: 66 -> 24 us per
// call at 2 ranks, 590 -> 185 us at 4 (README.md, "Synchronous pairs").
//
// Why a second context: a synchronous pair is no longer watched by the loop
// thread, and Gloo's unbound-buffer operations (gloo::allreduce, send/recv,
// ...) complete only through that thread. The communicator keeps its
// asynchronous context for those.
//
// Why not every message: a synchronous write returns once the kernel has
// taken all of it, so large ones could block each other; the ranks agree on
// a limit when they connect (sync_limit.h: 64 KiB on a default Linux, up to
// 1 MiB where the send buffers allow).
//
// Connected on first use, by the first operation that needs it, so a job
// that never runs one pays nothing at start-up. Every rank reaches that
// point in the same operation: the choice depends only on what the ranks
// agree on (operation, size, world size).
//
// Threads: Get and the operations on the context run on the thread that
// runs the communicator's operations (one at a time). Abort may come from
// any thread, at any time.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_SYNC_MESH_H_
#define DIST_PLUGINS_BACKENDS_GLOO_SYNC_MESH_H_

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dist/store.h"
#include "gloo/context.h"
#include "gloo/transport/device.h"
#include "plugins/backends/gloo/loop_kicker.h"

namespace dist_gloo {

class SyncMesh {
 public:
  // Borrows `store` (the communicator's; it outlives the communicator).
  // `pair_timeout` bounds every read and write on the pairs, and the wait
  // for the other ranks when connecting.
  // `send_buffer_bytes`: as the communicator's pairs (EnlargeSendBuffers).
  // `max_message_bytes`: the most this rank lets the pairs carry (the ranks
  // use the smallest any of them allows, see message_limit).
  SyncMesh(int rank, int size, const dist_store_t* store, std::shared_ptr<LoopKicker> device,
           std::chrono::milliseconds pair_timeout, int send_buffer_bytes, size_t max_message_bytes);
  ~SyncMesh();

  SyncMesh(const SyncMesh&) = delete;
  SyncMesh& operator=(const SyncMesh&) = delete;

  // The context, connected on the first call. An error (a rank that never
  // came, an abort) stays: later calls return it again.
  absl::StatusOr<std::shared_ptr<gloo::Context>> Get();

  // The largest message (bytes one rank writes to one peer before it
  // reads) that may travel on the pairs, the same on every rank
  // (sync_limit.h); 0 until Get has connected them.
  size_t message_limit() const;

  // This rank's own descriptors of the pairs' sockets (indexed by rank; -1
  // for this rank), for polling only: they stay open while this object
  // lives (an abort shuts them down, which makes them readable). Empty
  // until Get has connected the pairs.
  std::vector<int> peer_sockets() const;
  // What every read and write on the pairs waits at most.
  std::chrono::milliseconds pair_timeout() const { return pair_timeout_; }

  // Wakes a thread blocked reading a pair and fails every pair with
  // `reason` (the peers see their connections close). Idempotent; never
  // throws.
  void Abort(const std::string& reason);

  // Rank r's address as Gloo prints it in its errors; "" for this rank and
  // before the pairs are connected.
  std::vector<std::string> PeerAddresses() const;

 private:
  const int rank_;
  const int size_;
  const dist_store_t* const store_;
  const std::shared_ptr<LoopKicker> device_;
  const std::chrono::milliseconds pair_timeout_;
  const int send_buffer_bytes_;
  const size_t max_message_bytes_;

  mutable absl::Mutex mu_;
  std::shared_ptr<gloo::Context> context_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);  // "" until Abort
  // Duplicates of the pairs' sockets (DuplicatePairSocket), by rank.
  std::vector<int> sockets_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> peer_addresses_ ABSL_GUARDED_BY(mu_);
  size_t message_limit_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_SYNC_MESH_H_

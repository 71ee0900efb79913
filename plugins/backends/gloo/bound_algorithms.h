// Gloo's legacy algorithm classes (AllreduceRing, AllreduceHalvingDoubling,
// BroadcastOneToAll, AllgatherRing, BarrierAllToOne, ...) on buffers they
// own, cached per operation shape.
//
// Why: these classes register their buffers with the peers when they are
// constructed, after which a message is one write straight into the peer's
// buffer; Gloo's unbound-buffer entry points (gloo::allreduce, ...) instead
// post a receive and wait for the peer's go-ahead for every message, which
// made them 2-6x slower below ~1 MiB here (README.md, "Algorithm choice").
// Construction costs a round of buffer registration, so an instance is
// built once per (operation, dtype, count, reduce op, root, algorithm) and
// reused; the caller's data is copied into its buffer and out again (well
// under a microsecond at small sizes, ~2% of the operation at 1 MiB).
//
// Slots: each class takes its Gloo slots from Context::nextSlot() when
// built. The cache sets that counter first to a slot derived from the
// operation's match tag (validate.cc: kind, count, dtype, op, root) and
// the entry's index, so that ranks that disagree about an operation wait on
// different slots and time out with an error, as on the unbound path; the
// index keeps live instances apart. Every rank builds and evicts in the
// same order (eviction is by least recent use in issue order), so the
// slots agree.
//
// Timeouts: bound buffers wait with the pair's timeout, fixed when the
// connections were made (the communicator's Gloo timeout); the
// communicator uses this path only for operations with that timeout.
//
// Two contexts: instances whose messages are small run on the synchronous
// pairs of a SyncMesh (one thread wake-up per message instead of two; see
// sync_mesh.h), larger ones on the communicator's context.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BOUND_ALGORITHMS_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BOUND_ALGORITHMS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "dist/types.h"
#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "plugins/backends/gloo/algorithm.h"
#include "plugins/backends/gloo/peer_spin.h"
#include "plugins/backends/gloo/sync_mesh.h"

namespace dist_gloo {

class RingPipelined;  // ring_pipelined.h

class BoundAlgorithms {
 public:
  // `sync` (may be null: everything then runs on `context`) is borrowed and
  // outlives this object. `spin`: how long dist's own classes poll a
  // synchronous pair before they sleep in Gloo's read (peer_spin.h).
  BoundAlgorithms(std::shared_ptr<gloo::Context> context, SyncMesh* sync,
                  absl::Duration spin = absl::ZeroDuration());

  // False where the slot space is too small for this world size (the
  // classes reserve 2*W*(W-1) slots each); callers then use the unbound
  // path.
  bool usable() const { return usable_; }

  // Each runs one operation to completion on the calling thread; Gloo
  // exceptions propagate. Buffers may alias in any way (they are copied).
  // all_reduce: float16/bfloat16 are reduced as float32 and narrowed once;
  // avg divides once at the end. `algorithm` must be a bound one.
  void AllReduce(AllReduceAlgorithm algorithm, uint32_t tag, const void* send, void* recv,
                 size_t count, dist_dtype_t dtype, dist_reduce_op_t op);
  // all_reduce and all_gather on dist's pipelined ring (ring_pipelined.h),
  // on the caller's buffers (the same memory for in place, else disjoint).
  // Each returns false, having sent nothing, where the ring cannot run: no
  // synchronous pairs, no chunk that fits their limit, float16/bfloat16
  // (reduced at full precision on the other paths). Alike on every rank.
  bool RingAllReduce(uint32_t tag, const void* send, void* recv, size_t count, dist_dtype_t dtype,
                     dist_reduce_op_t op);
  bool RingAllGather(uint32_t tag, const void* send, void* recv, size_t block);
  bool RingBroadcast(uint32_t tag, const void* send, void* recv, size_t bytes, int root);
  // `bytes` on every rank; the root's send is broadcast into every recv.
  void Broadcast(uint32_t tag, const void* send, void* recv, size_t bytes, int root);
  // `block` bytes from every rank into recv (W blocks, rank order).
  void AllGather(uint32_t tag, const void* send, void* recv, size_t block);
  // all_to_all: BarrierAllToAll, else BarrierAllToOne (AlgorithmPolicy).
  void Barrier(uint32_t tag, bool all_to_all);

  // How many operations were given to the synchronous pairs so far
  // (counted before they run). Gloo reports every failed write on them
  // (synchronous mode throws), so a caller that sees this grow over an
  // operation that succeeded knows none of its writes raised SIGPIPE
  // (dist::ScopedSigpipeBlock::NoWriteFailed).
  uint64_t sync_runs() const { return sync_runs_; }

  // Whether any instance ever ran (the communicator then settles their
  // last messages before closing the connections).
  bool used() const { return uses_ > 0; }

 private:
  struct Key {
    bool sync;  // on the SyncMesh's context
    int kind;   // dist_collective_t
    int algorithm;
    int dtype;
    int op;
    int root;
    size_t count;
    int phase = 0;  // all_gather alternates between two instances (see AllGather)
    bool operator==(const Key& other) const {
      return sync == other.sync && kind == other.kind && algorithm == other.algorithm &&
             dtype == other.dtype && op == other.op && root == other.root && count == other.count &&
             phase == other.phase;
    }
  };
  struct Entry {
    Key key;
    int index = 0;  // distinct among live entries; part of the slot
    uint64_t last_use = 0;
    uint64_t runs = 0;
    std::vector<uint64_t> in;                // 8-byte aligned for every dtype
    std::vector<uint64_t> out;               // all_gather's result; unused otherwise
    std::shared_ptr<gloo::Context> context;  // the one the instance runs on
    std::unique_ptr<gloo::Algorithm> algorithm;
  };

  // Whether an instance whose largest message is `message_bytes` runs on
  // the synchronous pairs: up to the limit the ranks agreed on. The first
  // operation that could (at most kMaxSyncMessageBytes) connects them, so
  // every rank connects in the same operation; a failure to connect is
  // thrown like Gloo's own errors.
  bool UseSync(size_t message_bytes);
  // The pipelined ring's chunk for elements of `element` bytes, connecting
  // the synchronous pairs if no operation has yet; 0: the ring cannot run.
  size_t RingChunk(size_t element);
  // The cached pipelined ring for `key`, moving up to `bytes` in chunks of
  // whole `element`s (built if new); nullptr where the ring cannot run.
  RingPipelined* Ring(const Key& key, uint32_t tag, size_t bytes, size_t element);

  // The entry for `key`, building it with `make(entry, context)` (after
  // reserving `in_bytes`/`out_bytes` of buffer and setting the slot counter
  // of the context `key.sync` names) if new.
  template <typename Make>
  Entry& Find(const Key& key, uint32_t tag, size_t in_bytes, size_t out_bytes, Make&& make);
  void EvictFor(size_t bytes);

  std::shared_ptr<gloo::Context> context_;
  SyncMesh* const sync_;
  std::shared_ptr<gloo::Context> sync_context_;  // once connected
  size_t sync_limit_ = 0;                        // sync_->message_limit(), once connected
  const absl::Duration spin_budget_;
  PeerSpin spin_;  // on sync_'s sockets, once connected
  bool usable_ = false;
  int slot_bits_ = 0;  // log2 of the slots reserved per instance
  int hash_bits_ = 0;  // bits of the match tag in the slot
  uint64_t uses_ = 0;
  uint64_t sync_runs_ = 0;
  size_t cached_bytes_ = 0;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BOUND_ALGORITHMS_H_

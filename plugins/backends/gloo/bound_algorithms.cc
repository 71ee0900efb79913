#include "plugins/backends/gloo/bound_algorithms.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "dist/cpp/reduce.hpp"
#include "gloo/allgather_ring.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/barrier_all_to_one.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/math.h"
#include "plugins/backends/gloo/allgather_direct.h"
#include "plugins/backends/gloo/allreduce_recursive_doubling.h"
#include "plugins/backends/gloo/barrier_all_to_all.h"
#include "plugins/backends/gloo/barrier_all_to_one.h"
#include "plugins/backends/gloo/barrier_dissemination.h"
#include "plugins/backends/gloo/broadcast_direct.h"
#include "plugins/backends/gloo/pair_access.h"
#include "plugins/backends/gloo/reduction.h"
#include "plugins/backends/gloo/ring_pipelined.h"
#include "plugins/backends/gloo/sync_limit.h"

namespace dist_gloo {
namespace {

// At most this many instances and this many bytes of their buffers stay
// cached; the least recently used go first.
constexpr size_t kMaxEntries = 64;
constexpr int kIndexBits = 6;  // log2(kMaxEntries)
constexpr size_t kMaxCachedBytes = size_t{64} << 20;

// x = x (op) y for the bitwise ops, in the shape of Gloo's
// ReductionFunction (the arithmetic ones are Gloo's own).
template <typename T, dist_reduce_op_t kOp>
void BitwiseInto(T* x, const T* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if constexpr (kOp == DIST_BAND) x[i] = static_cast<T>(x[i] & y[i]);
    if constexpr (kOp == DIST_BOR) x[i] = static_cast<T>(x[i] | y[i]);
    if constexpr (kOp == DIST_BXOR) x[i] = static_cast<T>(x[i] ^ y[i]);
  }
}

template <typename T>
const gloo::ReductionFunction<T>* Function(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:
      return gloo::ReductionFunction<T>::sum;  // divided at the end
    case DIST_PRODUCT:
      return gloo::ReductionFunction<T>::product;
    case DIST_MIN:
      return gloo::ReductionFunction<T>::min;
    case DIST_MAX:
      return gloo::ReductionFunction<T>::max;
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    static const gloo::ReductionFunction<T> band(gloo::CUSTOM, &BitwiseInto<T, DIST_BAND>);
    static const gloo::ReductionFunction<T> bor(gloo::CUSTOM, &BitwiseInto<T, DIST_BOR>);
    static const gloo::ReductionFunction<T> bxor(gloo::CUSTOM, &BitwiseInto<T, DIST_BXOR>);
    if (op == DIST_BAND) return &band;
    if (op == DIST_BOR) return &bor;
    if (op == DIST_BXOR) return &bxor;
  }
  return nullptr;  // ValidateReduceOp rejected it at issue
}

// Runs `f(T{})` with the element type the reduction works in.
template <typename F>
void WithReduceType(dist_dtype_t dtype, F&& f) {
  switch (dtype) {
    case DIST_INT8:
      f(int8_t{});
      break;
    case DIST_UINT8:
      f(uint8_t{});
      break;
    case DIST_INT32:
      f(int32_t{});
      break;
    case DIST_INT64:
      f(int64_t{});
      break;
    case DIST_FLOAT64:
      f(double{});
      break;
    default:
      f(float{});
      break;  // float32; float16/bfloat16 widened
  }
}

template <typename T>
std::unique_ptr<gloo::Algorithm> MakeAllReduce(const std::shared_ptr<gloo::Context>& context,
                                               AllReduceAlgorithm algorithm, T* data, int count,
                                               dist_reduce_op_t op, PeerSpin* spin) {
  const std::vector<T*> ptrs = {data};
  const gloo::ReductionFunction<T>* fn = Function<T>(op);
  switch (algorithm) {
    case AllReduceAlgorithm::kRingChunked:
      return std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs, count, fn);
    case AllReduceAlgorithm::kHalvingDoubling:
      return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, ptrs, count, fn);
    case AllReduceAlgorithm::kBcube:
      return std::make_unique<gloo::AllreduceBcube<T>>(context, ptrs, count, fn);
    case AllReduceAlgorithm::kRecursiveDoubling:
      return std::make_unique<AllreduceRecursiveDoubling<T>>(context, data, count, fn, spin);
    default:
      return std::make_unique<gloo::AllreduceRing<T>>(context, ptrs, count, fn);
  }
}

// The class that runs `algorithm`, which already fits the shape
// (AlgorithmPolicy::ForAllReduce): AllreduceBcube only on synchronous
// pairs. Its all-gather phase writes into the peers' result buffers with no
// go-ahead. On asynchronous pairs the device thread stores such a write
// whenever it arrives, so a peer that starts the next run early overwrites
// a result before it is copied out: wrong sums when reused (seen at 4 ranks
// in tests/gloo, and with Gloo alone). On synchronous pairs nothing is read
// until the caller waits for it, in the order each peer sent it, so a
// message of the next run stays in the socket until this rank's next run
// asks for it. Elsewhere AllreduceHalvingDoubling, the same exchanges in
// halves. AllreduceRecursiveDoubling relies on the same ordering (its
// header says why); elsewhere it gives way to what the automatic rule
// chose before it existed: AllreduceRing on two ranks,
// AllreduceHalvingDoubling on more.
AllReduceAlgorithm ClassToRun(AllReduceAlgorithm algorithm, bool sync, int world_size) {
  if (sync) return algorithm;
  switch (algorithm) {
    case AllReduceAlgorithm::kBcube:
      return AllReduceAlgorithm::kHalvingDoubling;
    case AllReduceAlgorithm::kRecursiveDoubling:
      return world_size == 2 ? AllReduceAlgorithm::kRing : AllReduceAlgorithm::kHalvingDoubling;
    default:
      return algorithm;
  }
}

// Up to these sizes broadcast and all_gather on the synchronous pairs skip
// Gloo's go-aheads (broadcast_direct.h, allgather_direct.h). Above them the
// root's unpaced writes lost to Gloo's class: broadcast from 128 KiB on 2-4
// ranks (1.3-1.8x); larger broadcasts keep the clear-to-send. All_gather
// with 128 KiB blocks on 2 ranks was level with Gloo's class and still
// ahead with 87 KiB blocks on 3 (0.7-0.8x) (2026-12-03, README.md,
// "Algorithm choice").
constexpr size_t kDirectBroadcastMaxBytes = 64 << 10;
constexpr size_t kDirectAllGatherMaxBlockBytes = 128 << 10;

int Log2Ceil(size_t value) {
  int bits = 0;
  while ((size_t{1} << bits) < value) ++bits;
  return bits;
}

}  // namespace

BoundAlgorithms::BoundAlgorithms(std::shared_ptr<gloo::Context> context, SyncMesh* sync,
                                 absl::Duration spin)
    : context_(std::move(context)), sync_(sync), spin_budget_(spin) {
  const size_t w = static_cast<size_t>(context_->size);
  // AllreduceHalvingDoubling and AllreduceBcube reserve 2*W*(W-1) slots.
  slot_bits_ = Log2Ceil(2 * w * (w - 1) + 2);
  hash_bits_ = 31 - slot_bits_ - kIndexBits;
  // With fewer than 8 bits of the tag left (W > ~700) a mismatch would too
  // often land on the same slot; such groups use the unbound path.
  usable_ = context_->size > 1 && hash_bits_ >= 8;
  if (hash_bits_ > 20) hash_bits_ = 20;
}

void BoundAlgorithms::EvictFor(size_t bytes) {
  while (!entries_.empty() &&
         (entries_.size() >= kMaxEntries || cached_bytes_ + bytes > kMaxCachedBytes)) {
    size_t oldest = 0;
    for (size_t i = 1; i < entries_.size(); ++i) {
      if (entries_[i]->last_use < entries_[oldest]->last_use) oldest = i;
    }
    cached_bytes_ -= (entries_[oldest]->in.size() + entries_[oldest]->out.size()) * 8;
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(oldest));
  }
}

bool BoundAlgorithms::UseSync(size_t message_bytes) {
  if (sync_ == nullptr || message_bytes > kMaxSyncMessageBytes) return false;
  if (sync_context_ == nullptr) {
    absl::StatusOr<std::shared_ptr<gloo::Context>> connected = sync_->Get();
    // Thrown like Gloo's own errors: the communicator turns it into the
    // operation's error and aborts.
    if (!connected.ok()) throw std::runtime_error(std::string(connected.status().message()));
    sync_context_ = *std::move(connected);
    sync_limit_ = sync_->message_limit();
    spin_ = PeerSpin(sync_->peer_sockets(), spin_budget_);
  }
  return message_bytes <= sync_limit_;
}

size_t BoundAlgorithms::RingChunk(size_t element) {
  if (!UseSync(0)) return 0;
  return RingChunkBytes(sync_limit_, context_->size, element);
}

template <typename Make>
BoundAlgorithms::Entry& BoundAlgorithms::Find(const Key& key, uint32_t tag, size_t in_bytes,
                                              size_t out_bytes, Make&& make) {
  ++uses_;
  if (key.sync) ++sync_runs_;
  for (const std::unique_ptr<Entry>& entry : entries_) {
    if (entry->key == key) {
      entry->last_use = uses_;
      return *entry;
    }
  }
  const size_t in_words = (in_bytes + 7) / 8;
  const size_t out_words = (out_bytes + 7) / 8;
  EvictFor((in_words + out_words) * 8);
  auto entry = std::make_unique<Entry>();
  entry->key = key;
  entry->last_use = uses_;
  // The lowest index no live entry has: the same on every rank.
  std::vector<bool> taken(kMaxEntries, false);
  for (const std::unique_ptr<Entry>& other : entries_) taken[other->index] = true;
  while (taken[entry->index]) ++entry->index;
  entry->in.resize(in_words == 0 ? 1 : in_words);
  if (out_words > 0) entry->out.resize(out_words);
  entry->context = key.sync ? sync_context_ : context_;
  const uint32_t hash = tag & ((1u << hash_bits_) - 1);
  const int slot = static_cast<int>((hash << (slot_bits_ + kIndexBits)) |
                                    (static_cast<uint32_t>(entry->index) << slot_bits_));
  SetNextSlot(*entry->context, slot);
  entry->algorithm = make(*entry, entry->context);
  cached_bytes_ += (entry->in.size() + entry->out.size()) * 8;
  entries_.push_back(std::move(entry));
  return *entries_.back();
}

void BoundAlgorithms::AllReduce(AllReduceAlgorithm algorithm, uint32_t tag, const void* send,
                                void* recv, size_t count, dist_dtype_t dtype, dist_reduce_op_t op) {
  const bool half = IsHalf(dtype);
  const int size = context_->size;
  WithReduceType(dtype, [&](auto type) {
    using T = decltype(type);
    const size_t bytes = count * sizeof(T);
    // No algorithm sends more than the whole buffer to one peer at once.
    const bool sync = UseSync(bytes);
    const AllReduceAlgorithm runs = ClassToRun(algorithm, sync, size);
    const Key key{sync, DIST_COLL_ALL_REDUCE, static_cast<int>(runs), dtype, op, 0, count};
    Entry& entry = Find(key, tag, bytes, 0, [&](Entry& e, const auto& context) {
      return MakeAllReduce<T>(context, runs, reinterpret_cast<T*>(e.in.data()),
                              static_cast<int>(count), op, &spin_);
    });
    T* data = reinterpret_cast<T*>(entry.in.data());
    if (half) {
      dist::WidenToFloat(dtype, send, reinterpret_cast<float*>(data), count);
    } else {
      std::memcpy(data, send, bytes);
    }
    entry.algorithm->run();
    const dist_dtype_t reduced = half ? DIST_FLOAT32 : dtype;
    if (op == DIST_AVG) dist::FinishAverage(reduced, data, count, size);
    if (half) {
      dist::NarrowFromFloat(dtype, reinterpret_cast<float*>(data), recv, count);
    } else {
      std::memcpy(recv, data, bytes);
    }
  });
}

RingPipelined* BoundAlgorithms::Ring(const Key& key, uint32_t tag, size_t bytes, size_t element) {
  const size_t chunk = RingChunk(element);
  if (chunk == 0) return nullptr;
  Entry& entry = Find(key, tag, chunk, 0, [&](Entry& e, const auto& context) {
    return std::make_unique<RingPipelined>(context, bytes, e.in.data(), chunk, &spin_,
                                           sync_->pair_timeout());
  });
  return static_cast<RingPipelined*>(entry.algorithm.get());
}

bool BoundAlgorithms::RingAllReduce(uint32_t tag, const void* send, void* recv, size_t count,
                                    dist_dtype_t dtype, dist_reduce_op_t op) {
  if (IsHalf(dtype)) return false;
  const size_t element = dist_dtype_size(dtype);
  const Key key{true,
                DIST_COLL_ALL_REDUCE,
                static_cast<int>(AllReduceAlgorithm::kRingPipelined),
                dtype,
                op,
                0,
                count};
  RingPipelined* ring = Ring(key, tag, count * element, element);
  if (ring == nullptr) return false;
  ring->AllReduce(send, recv, count, dtype, op);
  return true;
}

bool BoundAlgorithms::RingAllGather(uint32_t tag, const void* send, void* recv, size_t block) {
  const Key key{true, DIST_COLL_ALL_GATHER, 2, 0, 0, 0, block};
  RingPipelined* ring = Ring(key, tag, block * static_cast<size_t>(context_->size), 1);
  if (ring == nullptr) return false;
  ring->AllGather(send, recv, block);
  return true;
}

bool BoundAlgorithms::RingBroadcast(uint32_t tag, const void* send, void* recv, size_t bytes,
                                    int root) {
  const Key key{true, DIST_COLL_BROADCAST, 3, 0, 0, root, bytes};
  RingPipelined* ring = Ring(key, tag, bytes, 1);
  if (ring == nullptr) return false;
  ring->Broadcast(send, recv, bytes, root);
  return true;
}

void BoundAlgorithms::Broadcast(uint32_t tag, const void* send, void* recv, size_t bytes,
                                int root) {
  const bool sync = UseSync(bytes);
  if (sync) {
    // From the caller's buffer into the callers' buffers, no copies; small
    // ones with no clear-to-send (broadcast_direct.h).
    const bool paced = bytes > kDirectBroadcastMaxBytes;
    const Key key{true, DIST_COLL_BROADCAST, paced ? 2 : 1, 0, 0, root, bytes};
    Entry& entry = Find(key, tag, bytes, 0, [&](Entry& e, const auto& context) {
      return std::make_unique<BroadcastDirect>(context, e.in.data(), bytes, root, paced, &spin_);
    });
    static_cast<BroadcastDirect&>(*entry.algorithm).Run(send, recv);
    if (context_->rank == root && recv != send) std::memmove(recv, send, bytes);
    return;
  }
  const Key key{false, DIST_COLL_BROADCAST, 0, 0, 0, root, bytes};
  Entry& entry = Find(key, tag, bytes, 0, [&](Entry& e, const auto& context) {
    const std::vector<uint8_t*> ptrs = {reinterpret_cast<uint8_t*>(e.in.data())};
    return std::make_unique<gloo::BroadcastOneToAll<uint8_t>>(context, ptrs, bytes, root);
  });
  char* data = reinterpret_cast<char*>(entry.in.data());
  if (context_->rank == root) {
    std::memcpy(data, send, bytes);
    entry.algorithm->run();
    if (recv != send) std::memmove(recv, data, bytes);
    return;
  }
  entry.algorithm->run();
  std::memcpy(recv, data, bytes);
}

void BoundAlgorithms::AllGather(uint32_t tag, const void* send, void* recv, size_t block) {
  const size_t w = static_cast<size_t>(context_->size);
  // AllgatherRing's peers write straight into its output buffer, and the
  // first write of a run waits for nothing: a neighbour that has finished
  // run k may start run k+1 and overwrite this rank's block before this
  // rank has copied run k's result out. It cannot get further ahead (its
  // next write needs this rank's data of run k+1), so two instances used in
  // turn keep every result intact.
  auto make = [&](Entry& e, const std::shared_ptr<gloo::Context>& context) {
    const std::vector<const uint8_t*> in = {reinterpret_cast<const uint8_t*>(e.in.data())};
    return std::make_unique<gloo::AllgatherRing<uint8_t>>(
        context, in, reinterpret_cast<uint8_t*>(e.out.data()), static_cast<int>(block));
  };
  // Each message is one rank's block.
  Key key{UseSync(block), DIST_COLL_ALL_GATHER, 0, 0, 0, 0, block};
  if (key.sync && block <= kDirectAllGatherMaxBlockBytes) {
    // Every rank writes its block from the caller's buffer straight into
    // every other's, with no notifications (allgather_direct.h): one
    // instance is enough there.
    key.algorithm = 1;
    Entry& entry = Find(key, tag, block, block * w, [&](Entry& e, const auto& context) {
      return std::make_unique<AllgatherDirect>(context, e.in.data(), e.out.data(), block, &spin_);
    });
    static_cast<AllgatherDirect&>(*entry.algorithm).Run(send, recv);
    return;
  }
  Entry& even = Find(key, tag, block, block * w, make);
  // `even` was just used, so finding the odd one never evicts it.
  key.phase = 1;
  Entry& entry = even.runs++ % 2 == 0 ? even : Find(key, tag, block, block * w, make);
  std::memcpy(entry.in.data(), send, block);
  entry.algorithm->run();
  std::memcpy(recv, entry.out.data(), block * w);
}

void BoundAlgorithms::Barrier(uint32_t tag, bool all_to_all) {
  const bool sync = UseSync(0);
  if (sync && context_->size == 2) {
    // One exchange of empty messages, as BarrierAllToAll's on 2 ranks, but
    // in dist's own class, which polls the socket before it sleeps
    // (barrier_dissemination.h).
    const Key key{true, DIST_COLL_BARRIER, 2, 0, 0, 0, 0};
    Entry& entry = Find(key, tag, 0, 0, [&](Entry&, const auto& context) {
      return std::make_unique<BarrierDissemination>(context, &spin_);
    });
    entry.algorithm->run();
    return;
  }
  const Key key{sync, DIST_COLL_BARRIER, all_to_all ? 1 : 0, 0, 0, 0, 0};
  Entry& entry =
      Find(key, tag, 0, 0,
           [&](Entry&,
               const std::shared_ptr<gloo::Context>& context) -> std::unique_ptr<gloo::Algorithm> {
             // On the synchronous pairs dist's own, with empty messages
             // (barrier_all_to_all.h); Gloo's need the device's loop on
             // the asynchronous ones.
             if (sync && all_to_all) return std::make_unique<BarrierAllToAll>(context, &spin_);
             if (sync) return std::make_unique<BarrierAllToOne>(context, 0, &spin_);
             if (all_to_all) return std::make_unique<gloo::BarrierAllToAll>(context);
             return std::make_unique<gloo::BarrierAllToOne>(context, 0);
           });
  entry.algorithm->run();
}

}  // namespace dist_gloo

// Which Gloo algorithm runs an all_reduce (broadcast, all_gather, barrier)
// of a given size on a given number of ranks. Gloo 0.5 offers two kinds:
// the entry points on unbound buffers (gloo::allreduce with ring or bcube,
// gloo::broadcast, ...), which post a receive per message, and the legacy
// algorithm classes on bound buffers (AllreduceRing, AllreduceRingChunked,
// AllreduceHalvingDoubling, AllreduceBcube, BroadcastOneToAll,
// AllgatherRing, BarrierAllToAll, BarrierAllToOne), which register their
// buffers with the peers once and then write straight into them: several
// times faster for small messages. Small all_reduces run on neither, but on
// dist's own recursive doubling in the legacy classes' shape
// (allreduce_recursive_doubling.h), which waits for half as many messages. README.md, "Algorithm
// choice", has the measurements behind the rule.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_ALGORITHM_H_
#define DIST_PLUGINS_BACKENDS_GLOO_ALGORITHM_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace dist_gloo {

enum class AllReduceAlgorithm {
  kGlooRing,         // gloo::allreduce, ring (unbound buffers)
  kGlooBcube,        // gloo::allreduce, bcube (unbound buffers)
  kRing,             // AllreduceRing (bound buffers, cached)
  kRingChunked,      // AllreduceRingChunked
  kHalvingDoubling,  // AllreduceHalvingDoubling
  kBcube,            // AllreduceBcube: on synchronous pairs only (bound_algorithms.cc)
  // dist's own (allreduce_recursive_doubling.h): on synchronous pairs only.
  kRecursiveDoubling,
  // dist's own (ring_pipelined.h), on the caller's buffers: on synchronous
  // pairs only; elsewhere gloo::allreduce (ForUnbound).
  kRingPipelined,
};

// The name distbench prints for the same raw Gloo variant.
const char* AlgorithmName(AllReduceAlgorithm algorithm);

// True for the legacy classes on bound buffers (bound_algorithms.h).
inline bool IsBound(AllReduceAlgorithm algorithm) {
  return algorithm != AllReduceAlgorithm::kGlooRing && algorithm != AllReduceAlgorithm::kGlooBcube;
}

// Whether AllreduceBcube can run `count` elements on `world_size` ranks:
// Gloo 0.5's class assumes a power of its base (2) and at least one element
// a rank. (Four or more: on two it is halving-doubling's single exchange.)
bool BcubeFits(size_t count, int world_size);

class AlgorithmPolicy {
 public:
  // `setting` is "auto" (or empty), "ring" or "bcube" (gloo::allreduce's),
  // or a class name as AlgorithmName gives it: option
  // gloo.allreduce_algorithm, else env DIST_GLOO_ALLREDUCE_ALGORITHM.
  static absl::StatusOr<AlgorithmPolicy> Parse(const std::string& setting);

  // The algorithm for an all_reduce of `bytes` (as reduced: float16 and
  // bfloat16 count as float32) over `world_size` ranks of `count` elements.
  // kBcube only where BcubeFits; the caller must still keep it and
  // kRecursiveDoubling off the asynchronous pairs (bound_algorithms.cc).
  AllReduceAlgorithm ForAllReduce(size_t bytes, size_t count, int world_size) const;
  // gloo::allreduce's algorithm (kGlooRing or kGlooBcube) for an all_reduce
  // that ForAllReduce gave to the unbound path, or whose class cannot run
  // here (kRingPipelined without synchronous pairs).
  AllReduceAlgorithm ForUnbound(size_t bytes, int world_size) const;
  // Whether an all_gather of `bytes` (the whole result) runs on the
  // pipelined ring (ring_pipelined.h) where the synchronous pairs are up.
  bool RingAllGather(size_t bytes) const;
  // Whether a broadcast of `bytes` runs as a chain on the pipelined ring.
  bool RingBroadcast(size_t bytes) const;

  // Whether broadcast / all_gather (bytes of the whole result) and barrier
  // run on the legacy bound-buffer classes.
  bool BoundBroadcast(size_t bytes, int world_size) const;
  bool BoundAllGather(size_t bytes, int world_size) const;
  bool BoundBarrier(int world_size) const;
  // Which legacy barrier: BarrierAllToAll (every rank tells every other, one
  // message latency) or BarrierAllToOne (to rank 0 and back, two).
  bool BarrierAllToAll(int world_size) const;

  const char* name() const { return name_.c_str(); }

 private:
  std::string name_ = "auto";
  bool is_auto_ = true;
  AllReduceAlgorithm forced_ = AllReduceAlgorithm::kGlooRing;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_ALGORITHM_H_

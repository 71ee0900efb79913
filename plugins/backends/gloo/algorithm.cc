#include "plugins/backends/gloo/algorithm.h"

#include "absl/strings/str_cat.h"
#include "plugins/backends/gloo/allreduce_recursive_doubling.h"

namespace dist_gloo {
namespace {

// Up to this size the bound-buffer classes run all_reduce (a copy into the
// cached instance's buffer and out again costs far less than the round trip
// per message that the unbound-buffer entry point adds); above it
// gloo::allreduce works on the caller's buffers directly. README.md,
// "Algorithm choice", has the figures.
constexpr size_t kBoundMaxBytes = 1 << 20;
// On 4 and 8 ranks AllreduceBcube, on synchronous pairs, beat
// AllreduceHalvingDoubling by 4-19% at every size it takes (one element or
// more a rank) from 64 B to 256 KiB (2026-12-03, README.md, "Algorithm
// choice"); on the asynchronous pairs it returns wrong sums when reused
// (bound_algorithms.cc), so it runs on the synchronous ones only.
// From 3 ranks on AllreduceHalvingDoubling's log2(W) halving steps beat
// AllreduceRing's W-1 full-size steps: on synchronous pairs at every size
// measured (3 and 4 ranks, 8 B-32 KiB, 2026-12-02), on the asynchronous
// ones above 32 KiB, and on 8 ranks at every size (2-7x). README.md,
// "Algorithm choice".
// On 2 ranks AllreduceRing wins up to this size and AllreduceHalvingDoubling
// above it, both on synchronous pairs (1 MiB: 396-407 against 697-735 us;
// 512 KiB: 216-221 against 251-264 us; 3 runs each, alternating).
constexpr size_t kTwoRankRingMaxBytes = 512 << 10;
// dist's recursive doubling (allreduce_recursive_doubling.h) takes log2(W)
// message latencies where Gloo's classes take 2 log2(W) or more, but sends
// the whole buffer at each of those steps: it beat every Gloo class at
// W = 2-8 up to 128-256 KiB and lost from 512 KiB (2-4 ranks) or 256 KiB
// (8 ranks) (2026-12-03, README.md, "Algorithm choice"). So it runs while
// the buffer is at most this size and it sends at most
// kRecursiveDoublingMaxSentBytes over all its steps.
constexpr size_t kRecursiveDoublingMaxBytes = 256 << 10;
constexpr size_t kRecursiveDoublingMaxSentBytes = 512 << 10;

// Above kBoundMaxBytes: dist's pipelined ring on the synchronous pairs
// (ring_pipelined.h). Where those are not up, on more than two ranks
// gloo::allreduce's bcube below this, its ring from it (measured before the
// bound classes came).
constexpr size_t kGlooBcubeBelowBytes = 4 << 20;
// all_gather results and broadcasts from these sizes run on the pipelined
// ring.
constexpr size_t kRingAllGatherMinBytes = 1 << 20;
constexpr size_t kRingBroadcastMinBytes = 1 << 20;
// broadcast and all_gather (the whole result): up to 4 MiB the legacy
// classes beat the unbound entry points at 2 and 4 ranks, 1.1-2.4x from
// 2 MiB, on synchronous pairs up to their limit and on the asynchronous
// ones above it (README.md, "Algorithm choice").
constexpr size_t kBoundBroadcastMaxBytes = 4 << 20;
constexpr size_t kBoundAllGatherMaxBytes = 4 << 20;

constexpr AllReduceAlgorithm kAll[] = {
    AllReduceAlgorithm::kGlooRing,
    AllReduceAlgorithm::kGlooBcube,
    AllReduceAlgorithm::kRing,
    AllReduceAlgorithm::kRingChunked,
    AllReduceAlgorithm::kHalvingDoubling,
    AllReduceAlgorithm::kBcube,
    AllReduceAlgorithm::kRecursiveDoubling,
    AllReduceAlgorithm::kRingPipelined,
};

}  // namespace

const char* AlgorithmName(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::kGlooRing:
      return "allreduce_ring";
    case AllReduceAlgorithm::kGlooBcube:
      return "allreduce_bcube";
    case AllReduceAlgorithm::kRing:
      return "AllreduceRing";
    case AllReduceAlgorithm::kRingChunked:
      return "AllreduceRingChunked";
    case AllReduceAlgorithm::kHalvingDoubling:
      return "AllreduceHalvingDoubling";
    case AllReduceAlgorithm::kBcube:
      return "AllreduceBcube";
    case AllReduceAlgorithm::kRecursiveDoubling:
      return "RecursiveDoubling";
    case AllReduceAlgorithm::kRingPipelined:
      return "RingPipelined";
  }
  return "?";
}

absl::StatusOr<AlgorithmPolicy> AlgorithmPolicy::Parse(const std::string& setting) {
  AlgorithmPolicy policy;
  if (setting.empty() || setting == "auto") return policy;
  policy.is_auto_ = false;
  policy.name_ = setting;
  if (setting == "ring") {
    policy.forced_ = AllReduceAlgorithm::kGlooRing;
    return policy;
  }
  if (setting == "bcube") {
    policy.forced_ = AllReduceAlgorithm::kGlooBcube;
    return policy;
  }
  for (AllReduceAlgorithm algorithm : kAll) {
    if (setting == AlgorithmName(algorithm)) {
      policy.forced_ = algorithm;
      return policy;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "gloo backend: unknown all_reduce algorithm '", setting,
      "' (option gloo.allreduce_algorithm or DIST_GLOO_ALLREDUCE_ALGORITHM); use auto, ring, "
      "bcube, AllreduceRing, AllreduceRingChunked, AllreduceHalvingDoubling, AllreduceBcube, "
      "RecursiveDoubling or RingPipelined"));
}

AllReduceAlgorithm AlgorithmPolicy::ForAllReduce(size_t bytes, size_t count, int world_size) const {
  if (!is_auto_) {
    // The class cannot run this shape (BcubeFits): the same exchanges in halves.
    return forced_ == AllReduceAlgorithm::kBcube && !BcubeFits(count, world_size)
               ? AllReduceAlgorithm::kHalvingDoubling
               : forced_;
  }
  if (bytes > kBoundMaxBytes) return AllReduceAlgorithm::kRingPipelined;
  if (bytes <= kRecursiveDoublingMaxBytes &&
      bytes * static_cast<size_t>(RecursiveDoublingSteps(world_size)) <=
          kRecursiveDoublingMaxSentBytes) {
    // BoundAlgorithms runs it on the synchronous pairs only; elsewhere what
    // follows (ClassToRun).
    return AllReduceAlgorithm::kRecursiveDoubling;
  }
  if (world_size <= 2) {
    return bytes <= kTwoRankRingMaxBytes ? AllReduceAlgorithm::kRing
                                         : AllReduceAlgorithm::kHalvingDoubling;
  }
  // BoundAlgorithms runs it on the synchronous pairs only and falls back to
  // AllreduceHalvingDoubling elsewhere (ClassToRun).
  return BcubeFits(count, world_size) ? AllReduceAlgorithm::kBcube
                                      : AllReduceAlgorithm::kHalvingDoubling;
}

AllReduceAlgorithm AlgorithmPolicy::ForUnbound(size_t bytes, int world_size) const {
  const bool bcube = is_auto_
                         ? world_size > 2 && bytes > kBoundMaxBytes && bytes < kGlooBcubeBelowBytes
                         : forced_ == AllReduceAlgorithm::kGlooBcube;
  return bcube ? AllReduceAlgorithm::kGlooBcube : AllReduceAlgorithm::kGlooRing;
}

bool AlgorithmPolicy::RingAllGather(size_t bytes) const { return bytes >= kRingAllGatherMinBytes; }

bool AlgorithmPolicy::RingBroadcast(size_t bytes) const { return bytes >= kRingBroadcastMinBytes; }

bool BcubeFits(size_t count, int world_size) {
  return world_size >= 4 && (world_size & (world_size - 1)) == 0 &&
         count >= static_cast<size_t>(world_size);
}

bool AlgorithmPolicy::BoundBroadcast(size_t bytes, int /*world_size*/) const {
  return bytes <= kBoundBroadcastMaxBytes;
}

bool AlgorithmPolicy::BoundAllGather(size_t bytes, int /*world_size*/) const {
  // On 4 ranks AllgatherRing once took 130-145 ms per 256 KiB call: Gloo's
  // send buffers, sized to each message, waited for delayed ACKs. With the
  // buffers enlarged (EnlargeSendBuffers) it runs at every world size
  // (README.md, "Algorithm choice").
  return bytes <= kBoundAllGatherMaxBytes;
}

bool AlgorithmPolicy::BoundBarrier(int /*world_size*/) const { return true; }

bool AlgorithmPolicy::BarrierAllToAll(int world_size) const {
  // Measured on the 2-core VM on the synchronous pairs (README.md,
  // "Algorithm choice", 2026-12-03): on 3 ranks AllToAll's one hop took
  // 49-50 us where AllToOne's two took 72-87; from 4 ranks AllToAll's
  // W*(W-1) messages lose (4 ranks 88-92 us against 76-79, 8 ranks 331-334
  // against 136-150). On 2 ranks the synchronous pairs run dist's own
  // exchange instead (barrier_dissemination.h). On the synchronous pairs
  // both are dist's own classes with empty messages
  // (barrier_all_to_all.h, barrier_all_to_one.h).
  return world_size <= 3;
}

}  // namespace dist_gloo

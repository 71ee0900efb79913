// One operation as the communicator queues it, the checks made when it is
// issued, and the functions that run each kind on a Gloo context.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_OP_H_
#define DIST_PLUGINS_BACKENDS_GLOO_OP_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "dist/backend_plugin.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "plugins/backends/gloo/algorithm.h"
#include "plugins/backends/gloo/bound_algorithms.h"

namespace dist_gloo {

struct VariableCounts;  // variable_counts.h

struct Op {
  dist_collective_t kind;
  dist_op_args_t args;  // a copy; the buffers' memory belongs to the caller
  int64_t seq;          // 1-based issue number on the communicator
  std::chrono::milliseconds timeout;
  // Set for a collective with a count per rank (run_v), whose args hold
  // the whole buffers: all_to_all_v, all_gather_v (variable_counts.h).
  std::shared_ptr<const VariableCounts> counts = nullptr;
};

// What an operation runs with.
struct OpEnv {
  std::shared_ptr<gloo::Context> context;
  std::chrono::milliseconds timeout;  // Gloo's timeout for this operation
  const AlgorithmPolicy* algorithms;
  uint32_t tag;  // Gloo tag; see MatchTag
  // The cached legacy algorithms, or null where this operation may not use
  // them (its timeout is not the one the connections wait with).
  BoundAlgorithms* bound = nullptr;
};

// A Gloo tag derived from what must agree between ranks (kind, count,
// dtype, op, root). Gloo's TCP transport sends data only once the receiver
// has posted a receive on the same slot, so ranks that disagree wait on
// different slots and time out with an error, instead of Gloo's I/O thread
// aborting the process on a message larger than the posted receive.
uint32_t MatchTag(const Op& op, int size);

// The hash behind every such tag: FNV-1a over 64-bit fields, folded to 31
// bits (below the communicator's shutdown tag).
class TagHash {
 public:
  void Mix(uint64_t field) {
    for (int byte = 0; byte < 8; ++byte) {
      hash_ ^= (field >> (8 * byte)) & 0xff;
      hash_ *= 0x100000001b3ull;
    }
  }
  uint32_t Tag() const { return static_cast<uint32_t>(hash_ ^ (hash_ >> 32)) & 0x7fffffffu; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ull;
};

// A send or recv posted to Gloo that completes later (see P2pCompleter).
struct PostedP2p {
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  bool is_send = false;
  int peer = -1;
};

// Gloo's own check, after the common ones of dist/cpp/validate.hpp (the
// plugin adapter makes those): every buffer the rank uses is CPU memory.
absl::Status ValidateOp(dist_collective_t kind, const dist_op_args_t& args, int rank);

// Each runs one operation to completion on the calling thread. Gloo
// exceptions propagate to the caller (the communicator catches them).
absl::Status RunAllReduce(const Op& op, const OpEnv& env);
absl::Status RunReduce(const Op& op, const OpEnv& env);
absl::Status RunReduceScatter(const Op& op, const OpEnv& env);
absl::Status RunBroadcast(const Op& op, const OpEnv& env);
absl::Status RunAllGather(const Op& op, const OpEnv& env);
absl::Status RunGather(const Op& op, const OpEnv& env);
absl::Status RunScatter(const Op& op, const OpEnv& env);
absl::Status RunAllToAll(const Op& op, const OpEnv& env);
absl::Status RunBarrier(const Op& op, const OpEnv& env);

// Posts a send or recv without waiting for it.
PostedP2p PostP2p(const Op& op, const OpEnv& env);

// Element count n of the operation (see backend_plugin.h), after ValidateOp.
uint64_t OpCount(dist_collective_t kind, const dist_op_args_t& args, int size);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_OP_H_

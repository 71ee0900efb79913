// The operations distbench measures: their buffer shapes (those of
// dist/backend_plugin.h), how a swept size maps onto element counts, and
// nccl-tests' bus-bandwidth factors.
#ifndef DIST_TOOLS_DISTBENCH_COLLECTIVES_H_
#define DIST_TOOLS_DISTBENCH_COLLECTIVES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dist/types.h"

namespace distbench {

enum class Op {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kBarrier,
  kSendRecv,
};

struct OpInfo {
  Op op;
  const char* name;              // the --op spelling
  dist_collective_t collective;  // for the backend's capability masks
  bool reduces;                  // takes --redop
  bool rooted;                   // takes --root
  bool send_per_rank;            // send holds one block per rank (n * W)
  bool recv_per_rank;            // recv holds one block per rank (n * W)
};

// Every operation in the order `--op all` runs them.
const std::vector<OpInfo>& AllOps();

// "all_reduce" -> its info; an unknown name lists the valid ones.
absl::StatusOr<const OpInfo*> FindOp(absl::string_view name);

// Parses "--op": one name, a comma-separated list, or "all".
absl::StatusOr<std::vector<const OpInfo*>> ParseOps(absl::string_view text);

absl::StatusOr<dist_dtype_t> ParseDtype(absl::string_view text);
absl::StatusOr<dist_reduce_op_t> ParseRedop(absl::string_view text);

// nccl-tests' busbw = algbw * factor: all_reduce 2(W-1)/W; all_gather,
// reduce_scatter, all_to_all, gather, scatter (W-1)/W; broadcast, reduce and
// sendrecv 1; barrier 0 (it moves no payload).
double BusBandwidthFactor(const OpInfo& op, int world_size);

// One measured configuration.
struct Case {
  const OpInfo* op = nullptr;
  dist_dtype_t dtype = DIST_FLOAT32;
  dist_reduce_op_t redop = DIST_SUM;
  int root = 0;
  int rank = 0;
  int world_size = 1;
  uint64_t block = 0;  // n: elements per rank block (see backend_plugin.h)

  uint64_t send_count() const { return op->send_per_rank ? block * world_size : block; }
  uint64_t recv_count() const { return op->recv_per_rank ? block * world_size : block; }
  size_t element_size() const { return dist_dtype_size(dtype); }
  // The size reported in the table: the larger buffer, as nccl-tests does.
  uint64_t bytes() const {
    return (send_count() > recv_count() ? send_count() : recv_count()) * element_size();
  }
  uint64_t count() const { return bytes() / element_size(); }
};

// The block count that makes Case::bytes() the largest not above `bytes`;
// 0 when even one element per rank is too big.
uint64_t BlockForBytes(const OpInfo& op, dist_dtype_t dtype, int world_size, uint64_t bytes);

// Sizes from `min_bytes` to `max_bytes`, multiplying by `factor` (> 1).
std::vector<uint64_t> SweepSizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor);

// The bytes each rank of a ring sends to its right neighbour (and receives
// from its left) for `c`: busbw's bytes, bytes() x BusBandwidthFactor
// (an all_reduce's ring 2(W-1)/W of the buffer, rounded to a byte), which
// is what nccl-tests' bus bandwidth counts per link. 0 for a barrier.
uint64_t RingShiftBytes(const Case& c);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_COLLECTIVES_H_

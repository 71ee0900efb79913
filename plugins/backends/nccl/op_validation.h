// The nccl backend's own checks of one operation, after the common ones of
// dist/cpp/validate.hpp (the buffer table of backend_plugin.h, which the
// plugin adapter makes first): CUDA buffers on this rank's GPU, NCCL's
// in-place conventions, no bitwise reductions, one stream. NCCL itself checks
// little (a wrong count on one rank hangs every rank), so a bad call must
// fail here, at once, with a message that names the fix. Pure logic: no
// CUDA, so it is tested on machines without a GPU.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_OP_VALIDATION_H_
#define DIST_PLUGINS_BACKENDS_NCCL_OP_VALIDATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/backend_plugin.h"

namespace dist_nccl {

// What the validator needs to know about the calling rank.
struct OpContext {
  int32_t rank = 0;
  int32_t world_size = 1;
  int32_t device = 0;  // CUDA ordinal of this rank's communicator
};

// OK when `args`, which passed dist::ValidateOpArgs, suit NCCL on this rank;
// otherwise DIST_UNIMPLEMENTED (CPU buffer, bitwise reduction) or
// DIST_INVALID_ARGUMENT (everything else), one line naming the fix.
absl::Status ValidateOpArgs(dist_collective_t op, const dist_op_args_t& args, const OpContext& ctx);

// The stream the operation is ordered on: the recv buffer's, else the send
// buffer's (only buffers the op uses count); NULL when neither names one.
// Two different streams are an error. Call after ValidateOpArgs.
absl::StatusOr<void*> ResolveStream(dist_collective_t op, const dist_op_args_t& args,
                                    const OpContext& ctx);

// The blocks of one variable-count collective (the table's run_v) on this
// rank, in elements, displacements filled in where the caller gave none.
// all_to_all_v: send block j goes to rank j, recv block i comes from rank i.
// all_gather_v: recv block i comes from rank i; the send buffer is one block.
// reduce_scatter_v: block r of send (recv_counts[r] elements at
// recv_displs[r], packed) is reduced onto rank r; recv is one block.
struct VariableBlocks {
  std::vector<uint64_t> send_counts;  // all_to_all_v only
  std::vector<uint64_t> send_displs;  // all_to_all_v only
  std::vector<uint64_t> recv_counts;
  std::vector<uint64_t> recv_displs;
  bool uses_send = false;  // some block of send is not empty
  bool uses_recv = false;  // some block of recv is not empty
  // reduce_scatter_v only: every rank keeps the same number of elements
  // (not 0), so NCCL's own reduce_scatter fits. Decided by the counts alone,
  // which agree between ranks, so that every rank takes the same path.
  bool uniform = false;
};

// "all_to_all_v", "all_gather_v" or "reduce_scatter_v", for messages.
std::string VariableName(dist_collective_t kind);

// The blocks of a variable-count collective when `args` and `counts` suit
// NCCL on this rank: every block inside its buffer, counts that agree with
// the buffers, CUDA buffers on this rank's GPU, no bitwise reduction, no
// overlap of send and recv but NCCL's in-place layouts (all_gather_v: send
// is recv's own block; reduce_scatter_v: recv is send's own block).
// Otherwise INVALID_ARGUMENT, one line naming the fix: never UNIMPLEMENTED,
// which run_v reserves for handing a kind back to the core (an answer that
// must not depend on one rank's arguments).
absl::StatusOr<VariableBlocks> CheckVariableArgs(dist_collective_t kind, const dist_op_args_t& args,
                                                 const dist_op_counts_t& counts,
                                                 const OpContext& ctx);

// ResolveStream for a variable-count collective (only buffers with a block
// that is not empty count).
absl::StatusOr<void*> ResolveVariableStream(dist_collective_t kind, const dist_op_args_t& args,
                                            const VariableBlocks& blocks);

// The one-line refusal for a CPU buffer (`which` is "send" or "recv").
std::string CpuBufferMessage(dist_collective_t op, const char* which);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_OP_VALIDATION_H_

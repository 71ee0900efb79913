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

// The one-line refusal for a CPU buffer (`which` is "send" or "recv").
std::string CpuBufferMessage(dist_collective_t op, const char* which);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_OP_VALIDATION_H_

// Checks, once and in the core, every size an operation implies before any
// plugin sees it: count x element size and count x world size must not
// overflow, a buffer's bytes must fit in the address space from its start
// address, and a per-operation timeout must be within kMaxTimeout
// (config.h). A host
// that claims 2^61+1 float64 elements would otherwise hand plugins a byte
// count that wrapped around to 8 (gloo then returned OK, shm ranks crashed).
// Backends keep the checks only they can make (device memory, their limits).
#ifndef DIST_CORE_OP_SIZES_H_
#define DIST_CORE_OP_SIZES_H_

#include <cstdint>

#include "absl/status/status.h"
#include "dist/backend_plugin.h"

namespace dist {

// OK, or InvalidArgument "<op>: <what overflows>; <fix>".
absl::Status CheckOpSizes(dist_collective_t kind, const dist_op_args_t& args, int32_t rank,
                          int32_t world_size);

}  // namespace dist

#endif  // DIST_CORE_OP_SIZES_H_

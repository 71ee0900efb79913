// Checks one operation's arguments before it is queued, so callers get
// shape, dtype, device and rank mistakes at once instead of from the worker.
#ifndef DIST_PLUGINS_BACKENDS_SHM_VALIDATE_H_
#define DIST_PLUGINS_BACKENDS_SHM_VALIDATE_H_

#include "absl/status/status.h"
#include "dist/backend_plugin.h"

namespace dist_shm {

absl::Status ValidateOp(dist_collective_t collective, const dist_op_args_t& args, int rank,
                        int world_size);

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_VALIDATE_H_

// The shm backend's own check of an operation before it is queued, after the
// common ones of dist/cpp/validate.hpp (the plugin adapter makes those):
// every buffer the rank uses is CPU memory.
#ifndef DIST_PLUGINS_BACKENDS_SHM_VALIDATE_H_
#define DIST_PLUGINS_BACKENDS_SHM_VALIDATE_H_

#include "absl/status/status.h"
#include "dist/backend_plugin.h"

namespace dist_shm {

absl::Status ValidateOp(dist_collective_t collective, const dist_op_args_t& args, int rank);

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_VALIDATE_H_

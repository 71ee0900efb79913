#include "validate.h"

#include "dist/cpp/validate.hpp"

namespace dist_shm {

absl::Status ValidateOp(dist_collective_t collective, const dist_op_args_t& args, int rank) {
  return dist::RequireDevice(collective, args, rank, DIST_DEVICE_CPU, "shm",
                             "the shm backend moves CPU memory only",
                             "use nccl for CUDA buffers (DIST_BACKEND=cpu:shm,cuda:nccl)");
}

}  // namespace dist_shm

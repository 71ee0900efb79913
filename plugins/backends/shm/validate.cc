#include "validate.h"

#include "absl/strings/str_cat.h"
#include "dist/cpp/validate.hpp"

namespace dist_shm {

absl::Status ValidateOp(dist_collective_t collective, const dist_op_args_t& args, int rank) {
  const char* which = nullptr;
  const dist_buffer_t* off =
      dist::BufferOffDevice(collective, args, rank, DIST_DEVICE_CPU, &which);
  if (off == nullptr) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "shm: ", dist_collective_name(collective), " got a ",
      dist_device_type_name(off->device.type), ":", off->device.index, " ", which,
      " buffer, but the shm backend moves CPU memory only; use nccl for CUDA buffers "
      "(DIST_BACKEND=cpu:shm,cuda:nccl)"));
}

}  // namespace dist_shm

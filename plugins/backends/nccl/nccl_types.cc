#include "plugins/backends/nccl/nccl_types.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dist_nccl {

absl::StatusOr<ncclDataType_t> ToNcclDataType(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_INT8:
      return ncclInt8;
    case DIST_UINT8:
      return ncclUint8;
    case DIST_INT32:
      return ncclInt32;
    case DIST_INT64:
      return ncclInt64;
    case DIST_FLOAT16:
      return ncclFloat16;
    case DIST_BFLOAT16:
      return ncclBfloat16;
    case DIST_FLOAT32:
      return ncclFloat32;
    case DIST_FLOAT64:
      return ncclFloat64;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("nccl: dtype ", static_cast<int>(dtype), " has no NCCL type"));
  }
}

absl::StatusOr<ncclRedOp_t> ToNcclRedOp(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
      return ncclSum;
    case DIST_PRODUCT:
      return ncclProd;
    case DIST_MIN:
      return ncclMin;
    case DIST_MAX:
      return ncclMax;
    case DIST_AVG:
      return ncclAvg;
    default:
      return absl::UnimplementedError(absl::StrCat(
          "nccl: NCCL has no reduction for ", dist_reduce_op_name(op),
          "; use sum, product, min, max or avg, or reduce CPU buffers with gloo, mpi or shm"));
  }
}

}  // namespace dist_nccl

// dist dtypes and reduce ops as NCCL's. float16 and bfloat16 map to NCCL's
// native types, avg to ncclAvg; there is no mapping for bitwise ops (the
// validator refuses them first).
#ifndef DIST_PLUGINS_BACKENDS_NCCL_NCCL_TYPES_H_
#define DIST_PLUGINS_BACKENDS_NCCL_NCCL_TYPES_H_

#include <nccl.h>

#include "absl/status/statusor.h"
#include "dist/types.h"

namespace dist_nccl {

absl::StatusOr<ncclDataType_t> ToNcclDataType(dist_dtype_t dtype);
absl::StatusOr<ncclRedOp_t> ToNcclRedOp(dist_reduce_op_t op);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_NCCL_TYPES_H_

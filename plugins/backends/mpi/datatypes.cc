#include "datatypes.h"

#include "dist/cpp/reduce.hpp"
#include "mpi_status.h"

namespace dist_mpi {
namespace {

MPI_Datatype g_float16 = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16 = MPI_DATATYPE_NULL;
// [dtype is bfloat16][op]: sum, product, min, max.
MPI_Op g_half_ops[2][4] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
                           {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};

// MPICH 4.0.2 (Debian 12) compares MPI_UINT8_T (and every unsigned type) as
// signed in MPI_MIN/MPI_MAX: min(51, 169) = 169 (pmodels/mpich#6083, fixed
// in 4.0.3). The MPICH build reduces uint8 min/max with its own ops.
#if defined(MPICH)
inline constexpr bool kUnsignedMinMaxBroken = true;
#else
inline constexpr bool kUnsignedMinMaxBroken = false;
#endif
MPI_Op g_uint8_ops[2] = {MPI_OP_NULL, MPI_OP_NULL};  // min, max

// MPI calls this with inout = in (op) inout, element-wise, `len` elements.
template <dist_dtype_t kDtype, dist_reduce_op_t kOp>
void HalfOp(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  dist::ReduceInto(kDtype, kOp, inout, in, static_cast<size_t>(*len));
}

template <dist_dtype_t kDtype>
absl::Status CreateHalfOps(MPI_Op* ops) {
  MPI_User_function* functions[4] = {&HalfOp<kDtype, DIST_SUM>, &HalfOp<kDtype, DIST_PRODUCT>,
                                     &HalfOp<kDtype, DIST_MIN>, &HalfOp<kDtype, DIST_MAX>};
  for (int i = 0; i < 4; ++i) {
    if (absl::Status s =
            MpiStatus(MPI_Op_create(functions[i], /*commute=*/1, &ops[i]), "MPI_Op_create");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CreateHalfType(MPI_Datatype* type) {
  if (absl::Status s = MpiStatus(MPI_Type_contiguous(2, MPI_BYTE, type), "MPI_Type_contiguous");
      !s.ok()) {
    return s;
  }
  return MpiStatus(MPI_Type_commit(type), "MPI_Type_commit");
}

}  // namespace

absl::Status InitDatatypes() {
  if (absl::Status s = CreateHalfType(&g_float16); !s.ok()) return s;
  if (absl::Status s = CreateHalfType(&g_bfloat16); !s.ok()) return s;
  if (absl::Status s = CreateHalfOps<DIST_FLOAT16>(g_half_ops[0]); !s.ok()) return s;
  if (kUnsignedMinMaxBroken) {
    for (int i = 0; i < 2; ++i) {
      MPI_User_function* function =
          i == 0 ? &HalfOp<DIST_UINT8, DIST_MIN> : &HalfOp<DIST_UINT8, DIST_MAX>;
      if (absl::Status s =
              MpiStatus(MPI_Op_create(function, /*commute=*/1, &g_uint8_ops[i]), "MPI_Op_create");
          !s.ok()) {
        return s;
      }
    }
  }
  return CreateHalfOps<DIST_BFLOAT16>(g_half_ops[1]);
}

void FreeDatatypes() {
  for (MPI_Op& op : g_uint8_ops) {
    if (op != MPI_OP_NULL) MPI_Op_free(&op);
  }
  for (auto& row : g_half_ops) {
    for (MPI_Op& op : row) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
  }
  if (g_float16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_float16);
  if (g_bfloat16 != MPI_DATATYPE_NULL) MPI_Type_free(&g_bfloat16);
}

MPI_Datatype MpiDatatype(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_INT8:
      return MPI_INT8_T;
    case DIST_UINT8:
      return MPI_UINT8_T;
    case DIST_INT32:
      return MPI_INT32_T;
    case DIST_INT64:
      return MPI_INT64_T;
    case DIST_FLOAT16:
      return g_float16;
    case DIST_BFLOAT16:
      return g_bfloat16;
    case DIST_FLOAT32:
      return MPI_FLOAT;
    case DIST_FLOAT64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

MPI_Op MpiReduceOp(dist_dtype_t dtype, dist_reduce_op_t op) {
  if (dtype == DIST_FLOAT16 || dtype == DIST_BFLOAT16) {
    const int row = dtype == DIST_BFLOAT16 ? 1 : 0;
    switch (op) {
      case DIST_SUM:
      case DIST_AVG:
        return g_half_ops[row][0];
      case DIST_PRODUCT:
        return g_half_ops[row][1];
      case DIST_MIN:
        return g_half_ops[row][2];
      case DIST_MAX:
        return g_half_ops[row][3];
      default:
        return MPI_OP_NULL;
    }
  }
  if (kUnsignedMinMaxBroken && dtype == DIST_UINT8 && (op == DIST_MIN || op == DIST_MAX)) {
    return g_uint8_ops[op == DIST_MIN ? 0 : 1];
  }
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:
      return MPI_SUM;
    case DIST_PRODUCT:
      return MPI_PROD;
    case DIST_MIN:
      return MPI_MIN;
    case DIST_MAX:
      return MPI_MAX;
    case DIST_BAND:
      return MPI_BAND;
    case DIST_BOR:
      return MPI_BOR;
    case DIST_BXOR:
      return MPI_BXOR;
    default:
      return MPI_OP_NULL;
  }
}

}  // namespace dist_mpi

// Mapping dist dtypes and reduce ops onto MPI datatypes and MPI_Ops.
//
// float16 and bfloat16 are 2-byte contiguous MPI types of their own, reduced
// by user-defined MPI_Ops that widen each pair to float, combine, and narrow
// once (dist/cpp/reduce.hpp), so no precision is lost beyond one rounding per
// combining step. AVG is sent as SUM; the caller divides at the end.
#ifndef DIST_PLUGINS_BACKENDS_MPI_DATATYPES_H_
#define DIST_PLUGINS_BACKENDS_MPI_DATATYPES_H_

#include <mpi.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/types.h"

namespace dist_mpi {

// Creates the float16/bfloat16 types and ops. Needs MPI initialized; call once.
absl::Status InitDatatypes();

// Frees what InitDatatypes made (before MPI_Finalize).
void FreeDatatypes();

MPI_Datatype MpiDatatype(dist_dtype_t dtype);

// The MPI_Op for `op` on `dtype` (AVG maps to SUM). The pair must already
// have passed dist::ValidateReduceOp.
MPI_Op MpiReduceOp(dist_dtype_t dtype, dist_reduce_op_t op);

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_DATATYPES_H_

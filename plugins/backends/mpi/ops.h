// The operations of the ABI: argument checks and the non-blocking MPI call
// behind each. Buffer shapes follow dist/backend_plugin.h.
#ifndef DIST_PLUGINS_BACKENDS_MPI_OPS_H_
#define DIST_PLUGINS_BACKENDS_MPI_OPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm.h"
#include "dist/backend_plugin.h"

namespace dist_mpi {

using OpResult = absl::StatusOr<std::shared_ptr<PendingOp>>;

OpResult StartAllReduce(Comm& comm, const dist_op_args_t& args);
OpResult StartBroadcast(Comm& comm, const dist_op_args_t& args);
OpResult StartReduce(Comm& comm, const dist_op_args_t& args);
OpResult StartAllGather(Comm& comm, const dist_op_args_t& args);
OpResult StartGather(Comm& comm, const dist_op_args_t& args);
OpResult StartScatter(Comm& comm, const dist_op_args_t& args);
OpResult StartReduceScatter(Comm& comm, const dist_op_args_t& args);
OpResult StartAllToAll(Comm& comm, const dist_op_args_t& args);
OpResult StartBarrier(Comm& comm, const dist_op_args_t& args);
OpResult StartSend(Comm& comm, const dist_op_args_t& args);
OpResult StartRecv(Comm& comm, const dist_op_args_t& args);

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_OPS_H_

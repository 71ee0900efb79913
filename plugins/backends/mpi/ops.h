// The operations of the ABI: MPI's own argument checks (after the common
// ones of dist/cpp/validate.hpp) and the non-blocking MPI call
// behind each. Buffer shapes follow dist/backend_plugin.h.
#ifndef DIST_PLUGINS_BACKENDS_MPI_OPS_H_
#define DIST_PLUGINS_BACKENDS_MPI_OPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm.h"
#include "dist/backend_plugin.h"

namespace dist_mpi {

using OpResult = absl::StatusOr<std::shared_ptr<PendingOp>>;

OpResult IssueAllReduce(Comm& comm, const dist_op_args_t& args);
OpResult IssueBroadcast(Comm& comm, const dist_op_args_t& args);
OpResult IssueReduce(Comm& comm, const dist_op_args_t& args);
OpResult IssueAllGather(Comm& comm, const dist_op_args_t& args);
OpResult IssueGather(Comm& comm, const dist_op_args_t& args);
OpResult IssueScatter(Comm& comm, const dist_op_args_t& args);
OpResult IssueReduceScatter(Comm& comm, const dist_op_args_t& args);
OpResult IssueAllToAll(Comm& comm, const dist_op_args_t& args);
OpResult IssueBarrier(Comm& comm, const dist_op_args_t& args);
OpResult IssueSend(Comm& comm, const dist_op_args_t& args);
OpResult IssueRecv(Comm& comm, const dist_op_args_t& args);

// dist_all_to_all_v (kind all_to_all), dist_all_gather_v (all_gather) and
// dist_reduce_scatter_v (reduce_scatter) through MPI_Ialltoallv,
// MPI_Iallgatherv and MPI_Ireduce_scatter (the table's run_v).
OpResult IssueVariable(dist_collective_t kind, Comm& comm, const dist_op_args_t& args,
                       const dist_op_counts_t& counts);

// The Issue* function of `kind` (the plugin adapter's one entry).
OpResult Issue(dist_collective_t kind, Comm& comm, const dist_op_args_t& args);

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_OPS_H_

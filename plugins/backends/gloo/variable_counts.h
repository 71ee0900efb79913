// The collectives with a count per rank that the plugin runs itself (the
// table's run_v, backend ABI 1.5): dist_all_to_all_v on gloo::alltoallv and
// dist_all_gather_v on gloo::allgatherv, Gloo's own public algorithms. The
// core builds dist_reduce_scatter_v (one all_reduce, then this rank's
// block): Gloo 0.5 has no variable-count reduce-scatter on unbound buffers.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_VARIABLE_COUNTS_H_
#define DIST_PLUGINS_BACKENDS_GLOO_VARIABLE_COUNTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dist/backend_plugin.h"
#include "plugins/backends/gloo/op.h"

namespace dist_gloo {

// The caller's dist_op_counts_t, copied (elements, world_size entries
// each): an operation queued behind others outlives the run_v call that
// borrowed the arrays. send_* stay empty for all_gather_v.
struct VariableCounts {
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
};

// Whether run_v runs `kind` here; UNIMPLEMENTED hands the others back to
// the core. Decided by the kind alone, so that every rank takes the same path.
bool RunsVariable(dist_collective_t kind);

// This rank's checks of a call (CPU buffers, one dtype, every block inside
// its buffer, sizes Gloo can count), then the copy of its counts. Errors
// are INVALID_ARGUMENT or OUT_OF_RANGE, never UNIMPLEMENTED.
absl::StatusOr<std::shared_ptr<const VariableCounts>> CheckVariable(dist_collective_t kind,
                                                                    const dist_op_args_t& args,
                                                                    const dist_op_counts_t& counts,
                                                                    int rank, int size);

// True when no rank has anything to move, judged from what every rank
// knows alike (all_gather_v's counts); all_to_all_v always runs.
bool VariableSettled(const Op& op);

// Runs op (op.counts set) on the calling thread. Gloo exceptions propagate
// to the caller (the communicator catches them and names the ranks).
absl::Status RunVariableCollective(const Op& op, const OpEnv& env);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_VARIABLE_COUNTS_H_

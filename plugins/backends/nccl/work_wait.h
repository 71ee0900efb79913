// Host-side waiting for one operation: polls its CUDA event with a
// deadline, and every millisecond runs the communicator's check
// (ncclCommGetAsyncError, op timeouts), so a failing peer ends the wait with
// an error instead of a hang.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_WORK_WAIT_H_
#define DIST_PLUGINS_BACKENDS_NCCL_WORK_WAIT_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "plugins/backends/nccl/communicator.h"
#include "plugins/backends/nccl/work_state.h"

namespace dist_nccl {

// The operation's result, or DEADLINE_EXCEEDED after `timeout` (the
// operation stays pending; waiting again is allowed).
absl::Status WaitForWork(WorkState& work, Communicator& comm, absl::Duration timeout);

// Orders `stream` after the operation without blocking the host
// (cudaStreamWaitEvent). An operation that already failed returns its error.
absl::Status WaitOnStream(WorkState& work, Communicator& comm, void* stream);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_WORK_WAIT_H_

// comm_create: picks this rank's GPU, checks through the store that no two
// ranks share a GPU, passes rank 0's ncclUniqueId to the others through the
// store, and initializes a non-blocking NCCL communicator, polling it with
// the config's timeout (aborting it when the timeout passes).
#ifndef DIST_PLUGINS_BACKENDS_NCCL_BOOTSTRAP_H_
#define DIST_PLUGINS_BACKENDS_NCCL_BOOTSTRAP_H_

#include <memory>

#include "absl/status/statusor.h"
#include "dist/backend_plugin.h"
#include "plugins/backends/nccl/communicator.h"

namespace dist_nccl {

absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(const dist_comm_config_t& config);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_BOOTSTRAP_H_

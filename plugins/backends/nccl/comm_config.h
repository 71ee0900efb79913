// The ncclConfig_t of every communicator this plugin makes: non-blocking
// (every call is polled, so deadlines and aborts work) and named after the
// dist group, for NCCL's own logs.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_COMM_CONFIG_H_
#define DIST_PLUGINS_BACKENDS_NCCL_COMM_CONFIG_H_

#include <nccl.h>

#include <string>

namespace dist_nccl {

ncclConfig_t NonBlockingConfig(const std::string& group);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_COMM_CONFIG_H_

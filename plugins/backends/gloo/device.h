// Chooses the network interface for Gloo's TCP transport and creates the
// transport device.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_DEVICE_H_
#define DIST_PLUGINS_BACKENDS_GLOO_DEVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dist/backend_plugin.h"
#include "gloo/transport/device.h"

namespace dist_gloo {

// The value of backend option `key` in `config`, or "" when absent.
std::string FindOption(const dist_comm_config_t& config, const char* key);

// In order: option "gloo.ifname", env DIST_GLOO_IFNAME (an interface name),
// option "gloo.hostname", env DIST_GLOO_HOSTNAME (an address or host name
// to bind); else loopback when every rank runs on this host
// (local_world_size == world_size), else this host's name, which must
// resolve to an address the other hosts can reach.
absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateDevice(
    const dist_comm_config_t& config, std::string* description);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_DEVICE_H_

// Chooses the local address Gloo's TCP transport binds and publishes to the
// other ranks, and creates the transport device.
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

// The rendezvous host as the effective init method names it (the option
// DIST_OPTION_INIT_METHOD the core passes, else DIST_INIT_METHOD): the host
// of tcp://HOST:PORT; else master_addr= in the URL, MASTER_ADDR or Slurm's
// first host, as env:// reads them. "" when none is known. `source` says
// where it came from, for messages.
std::string RendezvousHost(const dist_comm_config_t& config, std::string* source);

// The address, in order:
//  1. named: option "gloo.ifname", env DIST_GLOO_IFNAME (an interface),
//     option "gloo.hostname", env DIST_GLOO_HOSTNAME (an address or name);
//  2. loopback when every rank runs on this host (local_world_size ==
//     world_size);
//  3. the local address the kernel routes towards the rendezvous host,
//     which is the address this rank's store connection uses. The host is
//     the effective init method's (the option DIST_OPTION_INIT_METHOD the
//     core passes: tcp://HOST, or for env:// master_addr=, MASTER_ADDR or
//     Slurm's first host, as env:// itself reads them). When that route is
//     loopback (the rendezvous host is this host under a name that resolves
//     to 127.0.1.1 here, as Debian's /etc/hosts does) and the world spans
//     hosts, the address the ranks on other hosts reached it at, which
//     they leave in the store (loopback when every rank turns out to run
//     on this host);
//  4. this host's name when it resolves to a non-loopback address of this
//     host, else the address of the only up non-loopback interface.
// A loopback address while the ranks run on several hosts is an error
// naming where it came from: ranks on other hosts could never connect to
// it. Out of descriptors, the error says so and who holds them (a store
// this rank hosts, say), not which interface to pick. "Several hosts": the launcher says so
// (local_world_size < world_size) and the ranks' host names, compared through the store, differ;
// one machine playing several nodes keeps loopback.
absl::StatusOr<std::shared_ptr<gloo::transport::Device>> CreateDevice(
    const dist_comm_config_t& config, std::string* description);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_DEVICE_H_

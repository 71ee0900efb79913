// Finds a TCP port nobody listens on, for MASTER_PORT.
#ifndef DIST_TOOLS_DISTRUN_FREE_PORT_H_
#define DIST_TOOLS_DISTRUN_FREE_PORT_H_

#include <string>

#include "absl/status/statusor.h"

namespace dist::distrun {

// Binds port 0 on `address` (any local address when it is not a numeric
// IPv4/IPv6 address of this host) and returns the port the kernel chose. The
// socket is closed again, so another process could take the port before
// rank 0 does; the kernel hands ports out round-robin, which makes that rare.
absl::StatusOr<int> PickFreePort(const std::string& address);

}  // namespace dist::distrun

#endif  // DIST_TOOLS_DISTRUN_FREE_PORT_H_

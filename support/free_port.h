// Finds a TCP port nobody listens on (MASTER_PORT for distrun and distbench,
// the conformance kit's store, tests). The one copy: tools, tests and the
// SDK's conformance kit use it.
#ifndef DIST_SUPPORT_FREE_PORT_H_
#define DIST_SUPPORT_FREE_PORT_H_

#include <string>

#include "absl/status/statusor.h"

namespace dist {

// Binds port 0 on `address` (any local address when it is not a numeric
// IPv4/IPv6 address of this host) and returns the port the kernel chose. The
// socket is closed again, so another process could take the port before
// rank 0 does; the kernel hands ports out round-robin, which makes that rare.
absl::StatusOr<int> PickFreePort(const std::string& address = "127.0.0.1");

}  // namespace dist

#endif  // DIST_SUPPORT_FREE_PORT_H_

// Runs one operation through the dist host API (the plugin under test).
#ifndef DIST_TOOLS_DISTBENCH_DIST_OPS_H_
#define DIST_TOOLS_DISTBENCH_DIST_OPS_H_

#include "absl/status/status.h"
#include "dist/dist.h"
#include "tools/distbench/collectives.h"

namespace distbench {

// Blocking: returns when this rank's part is complete. send/recv hold
// c.send_count()/c.recv_count() elements on `device`.
absl::Status RunThroughDist(dist_process_group_t* pg, const Case& c, void* send, void* recv,
                            dist_device_t device);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_DIST_OPS_H_

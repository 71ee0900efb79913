// Small collectives distbench needs for itself (agreeing on results and on
// addresses), done through the process group under test on its own device.
#ifndef DIST_TOOLS_DISTBENCH_GROUP_UTIL_H_
#define DIST_TOOLS_DISTBENCH_GROUP_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dist/dist.h"

namespace distbench {

// Rank 0's `value` on every rank (at most 1024 bytes).
absl::StatusOr<std::string> BroadcastString(dist_process_group_t* pg, dist_device_t device,
                                            const std::string& value);

// `value` reduced over every rank with DIST_SUM or DIST_MAX.
absl::StatusOr<double> AllReduceDouble(dist_process_group_t* pg, dist_device_t device, double value,
                                       dist_reduce_op_t op);

// The same, element-wise, for several values at once (same size on every rank).
absl::StatusOr<std::vector<double>> AllReduceDoubles(dist_process_group_t* pg, dist_device_t device,
                                                     const std::vector<double>& values,
                                                     dist_reduce_op_t op);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_GROUP_UTIL_H_

// dist conformance kit: the "failure" section (dist_conformance
// --only=failure), which runs apart from the others because it changes the
// job: in each round one rank dies (SIGKILL, or SIGSTOP and later SIGKILL)
// in the middle of an operation, the survivors must get DIST_REVOKED or the
// peer's failure within a bound, shrink (dist_shrink) to a group whose every
// collective is checked against the reference, and grow back (dist_grow)
// with a joining process that rank 0 starts, the grown group checked the
// same way. One round per declared operation (every collective, and
// sendrecv) and per way of dying. Through the core only (shrink and grow are
// the host API's), under the local launcher, meeting over tcp:// with rank
// 0 hosting the store: rank 0 never dies (it starts the joiners and waits
// for them), and a stopped rank holds no lock of a store file.
#ifndef DIST_SDK_CONFORMANCE_FAILURE_H_
#define DIST_SDK_CONFORMANCE_FAILURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sdk/conformance/report.h"

namespace dist::conformance {

struct FailureOptions {
  std::string plugin;  // path or name
  std::string url;     // tcp://127.0.0.1:PORT, rank 0 hosting the store
  int32_t rank = -1;   // -1: a joiner
  int32_t world_size = -1;
  std::string results_file;
  // >= 0: this process joins in that round (started by rank 0).
  int join_round = -1;
  int64_t op_timeout_ms = 30000;
  // How rank 0 starts a joiner: this binary and the worker arguments.
  std::string self;
  std::vector<std::string> worker_args;
};

// The section on one process; the exit code (0: every check passed).
int RunFailureWorker(const FailureOptions& options);

// Whether a process's rows say it was made to die (so its SIGKILL is not a
// crash).
bool DiedOnPurpose(const std::vector<Row>& rows);

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_FAILURE_H_

// dist conformance kit: one rank's run (load, probe, rendezvous, suite).
#ifndef DIST_SDK_CONFORMANCE_WORKER_H_
#define DIST_SDK_CONFORMANCE_WORKER_H_

#include <string>

#include "sdk/conformance/suite.h"

namespace dist::conformance {

struct WorkerOptions {
  std::string plugin;  // path or name
  std::string url;     // init method, e.g. tcp://127.0.0.1:PORT
  int32_t rank = -1;   // -1: from the launcher's environment
  int32_t world_size = -1;
  std::string results_file;  // rows go here; "" prints the table on rank 0
  std::string results_dir;   // or here, as rank<R>.tsv (under mpirun)
  bool through_core = false;
  bool only_failures = false;
  SuiteOptions suite;
};

// Returns the process exit code: 0 when every check passed (or the plugin
// cannot run here and says why), 1 otherwise.
int RunWorker(const WorkerOptions& options);

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_WORKER_H_

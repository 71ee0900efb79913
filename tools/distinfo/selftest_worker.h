// The hidden worker mode of distinfo (--selftest_worker=BACKEND): one rank
// of the self-test. Prints one line, kWorkerMarker + JSON, with each step's
// result and time; exits 0 when every step passed.
#ifndef DIST_TOOLS_DISTINFO_SELFTEST_WORKER_H_
#define DIST_TOOLS_DISTINFO_SELFTEST_WORKER_H_

#include <cstdint>
#include <string>

namespace dist::distinfo {

// `init_method` is "env://" or "tcp://host:port" (the worker adds its rank
// and the world size). Rank and world size come from RANK/WORLD_SIZE, or
// from Open MPI's OMPI_COMM_WORLD_* under mpirun.
int RunSelftestWorker(const std::string& backend, const std::string& init_method,
                      int64_t timeout_ms);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_SELFTEST_WORKER_H_

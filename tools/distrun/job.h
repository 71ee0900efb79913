// What distrun is asked to run: the program and how its ranks are laid out.
#ifndef DIST_TOOLS_DISTRUN_JOB_H_
#define DIST_TOOLS_DISTRUN_JOB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dist::distrun {

struct Job {
  std::vector<std::string> argv;  // program and its arguments
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: pick a free one (single node only)
  std::string backend;  // empty: leave DIST_BACKEND alone
  // DIST_INIT_METHOD of every rank; the ranks still get RANK, WORLD_SIZE,
  // MASTER_ADDR, ... for tcp:// and file:// URLs without ?rank=. When
  // distrun hosts the store, main.cc replaces it with the URL naming that
  // store (hosted_store.h).
  std::string init_method = "env://";
  // Whether distrun hosts the job's store (env:// only; several nodes only
  // with store_port), so that it outlives every rank (hosted_store.h).
  bool host_store = true;
  // The port of the store distrun hosts; 0: a free one (one node only).
  int store_port = 0;
  // The soft open-files limit the ranks start with; 0: distrun's own. The
  // store distrun hosts raises distrun's limit for its clients, and the
  // ranks must not inherit that.
  uint64_t rank_open_files = 0;
  // The job's store secret, given to every rank as DIST_STORE_TOKEN; empty:
  // leave DIST_STORE_TOKEN as it is (distrun fills this in, see main.cc).
  std::string store_token;
  // After the first failure the others get `grace` to end by themselves,
  // then SIGTERM, then after another `grace` SIGKILL.
  absl::Duration grace = absl::Seconds(3);
  absl::Duration timeout = absl::ZeroDuration();  // whole job; 0: none
  bool prefix = true;
  // A rank killed by a signal does not stop the others: they may go on
  // without it (every rank gets DIST_SURVIVAL=1; docs/survival.md).
  bool survive = false;
  // Under survive: how many times in all a rank killed by a signal is
  // started again, as a process that joins the running job (DIST_JOIN=1;
  // the survivors admit it with dist_grow). Every rank gets
  // DIST_MAX_RESTARTS so that it knows to grow back.
  int max_restarts = 0;

  int world_size() const { return nproc_per_node * nnodes; }
  int global_rank(int local_rank) const { return node_rank * nproc_per_node + local_rank; }
};

// Checks the layout; errors name the flag and the fix.
absl::Status ValidateJob(const Job& job);

// A warning when --nnodes > 1 meets a loopback --master_addr (distrun's
// default): right only when one machine plays every node.
std::optional<std::string> MasterAddrWarning(const Job& job);

// The environment of local rank `local_rank`: `base` (KEY=VALUE strings)
// with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, DIST_INIT_METHOD (job.init_method) and, with a backend, DIST_BACKEND
// (with a store token, DIST_STORE_TOKEN) replaced. job.master_port must be resolved
// (non-zero) by now. `restart` > 0: the rank's restart number (DIST_RESTART_COUNT),
// started as a joining process (DIST_JOIN=1).
std::vector<std::string> RankEnvironment(const Job& job, int local_rank,
                                         const std::vector<std::string>& base, int restart = 0);

// This process's environment (KEY=VALUE strings): the usual `base` above.
std::vector<std::string> CurrentEnvironment();

}  // namespace dist::distrun

#endif  // DIST_TOOLS_DISTRUN_JOB_H_

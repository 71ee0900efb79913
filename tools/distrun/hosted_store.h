// The store distrun hosts for its ranks, as torchrun's agent does: it lives
// in distrun's process, so it outlives every rank, rank 0 included, and the
// survivors of rank 0's death can still shrink (--survive,
// docs/survival.md).
//
// The ranks reach it through env://?external=1&master_port=PORT: env:// so
// that RANK, MASTER_ADDR, ... still come from the environment, external=1 so
// that rank 0 starts no server of its own, and the port in the URL rather
// than in MASTER_PORT, which stays a free port for programs that host their
// own store there (torch.distributed's init_process_group with env://).
#ifndef DIST_TOOLS_DISTRUN_HOSTED_STORE_H_
#define DIST_TOOLS_DISTRUN_HOSTED_STORE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "plugins/store/tcp_store_server.h"
#include "tools/distrun/job.h"

namespace dist::distrun {

// Where the ranks of `job` find their store.
struct StorePlan {
  bool external = false;   // in the store distrun hosts on node 0
  bool host_here = false;  // ... and this distrun is node 0's
};

// distrun hosts the store when --host_store is on and --init_method is the
// default env://; on several nodes only with --store_port, since the nodes
// cannot agree on a free port by themselves.
StorePlan PlanStore(const Job& job);

// A warning when --survive meets a store that rank 0 hosts after all
// (several nodes without --store_port): losing rank 0 then ends the job.
std::optional<std::string> StorePlanWarning(const Job& job);

// The ranks' DIST_INIT_METHOD for the store on `port` of MASTER_ADDR.
std::string HostedStoreInitMethod(int port);

// How long the store keeps serving after this node's ranks have ended, for
// clients still connected: on one node they can only be the ranks' own
// leftovers; on node 0 of several they are the other nodes' ranks, which
// may still need it (rank 0's own store waits as long, dist's default
// timeout), unless the job failed.
absl::Duration StoreLinger(const Job& job, int exit_code);

class HostedStore {
 public:
  // Listens on job.master_addr (every interface when that is a host name)
  // at job.store_port (0: a free port), requiring `token` (none if empty).
  // Returns at once: the server runs on a thread of its own.
  static absl::StatusOr<std::unique_ptr<HostedStore>> Start(const Job& job,
                                                            const std::string& token);
  ~HostedStore();  // stops at once

  int port() const { return server_->port(); }

  // Serves until every client has left or `linger` has passed, then stops.
  void Stop(absl::Duration linger);

 private:
  explicit HostedStore(std::unique_ptr<store::TcpStoreServer> server);

  std::unique_ptr<store::TcpStoreServer> server_;
};

}  // namespace dist::distrun

#endif  // DIST_TOOLS_DISTRUN_HOSTED_STORE_H_

// Who a process of an mpi:// job is: rank and world size are MPI_COMM_WORLD's
// (MPI is initialized here unless it is up already), local rank and local
// world size come from the launcher's variables.
#ifndef DIST_PLUGINS_RENDEZVOUS_MPI_MPI_RANKS_H_
#define DIST_PLUGINS_RENDEZVOUS_MPI_MPI_RANKS_H_

#include "absl/status/statusor.h"
#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/ranks.h"
#include "support/url.h"

namespace dist::rendezvous {

using support::Query;
using support::Url;

// A caller's hints (may be NULL) that name another rank or world size than
// MPI_COMM_WORLD's are an error.
absl::StatusOr<RankInfo> MpiRanks(const Url& url, const Query& query,
                                  const dist_rendezvous_hints_t* hints);

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_MPI_MPI_RANKS_H_

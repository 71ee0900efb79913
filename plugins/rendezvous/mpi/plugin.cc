// mpi:// (built as openmpi:// and mpich://): the init method of a job that an
// MPI launcher started. Rank and world size are MPI_COMM_WORLD's; the store
// the core needs (join check, group namespaces, the backends' own keys) is
// the TCP store, served by rank 0 on a port the kernel picks and announced
// to the other ranks with one MPI broadcast, so no MASTER_ADDR/MASTER_PORT.
// Initializing MPI here is the cost the MPI backend would pay anyway.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/rendezvous_adapter.hpp"
#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/plugin_support.h"
#include "plugins/rendezvous/common/tcp_rendezvous.h"
#include "plugins/rendezvous/mpi/mpi_ranks.h"
#include "plugins/rendezvous/mpi/store_announcement.h"
#include "support/mpi_flavor.h"
#include "support/url.h"

namespace dist::rendezvous {

using support::ParseUrl;
namespace {

namespace flavor = dist_mpi_flavor;

const char* const kSchemes[] = {flavor::kName, nullptr};

absl::Status ResolveMpi(const char* text, const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                        dist_rendezvous_result_t* result) {
  if (Joining(hints)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "init method '", text,
        "': a process cannot join a running MPI job (MPI starts all of a job's processes "
        "together); let joining processes meet over tcp:// or env:// with ?external=1"));
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
  absl::StatusOr<Url> url = ParseUrl(text);
  if (!url.ok()) return url.status();
  if (url->scheme != "mpi" && url->scheme != flavor::kName) {
    return absl::InvalidArgumentError(absl::StrCat("init method '", url->text, "': the ",
                                                   flavor::kName, " plugin handles mpi:// and ",
                                                   flavor::kName, "://"));
  }
  if (!url->host.empty() || url->port >= 0 || (!url->path.empty() && url->path != "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed init method URL '", url->text,
                     "': mpi:// takes no host, port or path "
                     "(ranks and the store's address come from MPI); use mpi://"));
  }
  absl::StatusOr<Query> query = Query::From(*url, {});
  if (!query.ok()) return query.status();

  absl::StatusOr<RankInfo> ranks = MpiRanks(*url, *query, hints);
  if (!ranks.ok()) return ranks.status();

  TcpRendezvousConfig config;
  config.url = url->text;
  config.component = flavor::kName;
  config.rank = ranks->rank;
  config.token = StoreToken(hints);
  config.timeout = absl::Milliseconds(timeout_ms);

  absl::StatusOr<dist_store_t*> store =
      ranks->rank == 0
          ? HostAndAnnounce(config, ranks->local_world_size == ranks->world_size, ranks->world_size,
                            hints, timeout_ms, deadline)
          : JoinAnnounced(config, ranks->rank, ranks->world_size, timeout_ms, deadline);
  if (!store.ok()) return store.status();
  FillResult(*ranks, *store, result);
  return absl::OkStatus();
}

}  // namespace
}  // namespace dist::rendezvous

DIST_EXPORT_RENDEZVOUS_PLUGIN(dist_mpi_flavor::kName, dist::rendezvous::kSchemes,
                              dist::rendezvous::ResolveMpi)

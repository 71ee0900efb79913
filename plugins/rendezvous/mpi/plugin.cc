// mpi:// (built as openmpi:// and mpich://): the init method of a job that an
// MPI launcher started. Rank and world size are MPI_COMM_WORLD's; the store
// the core needs (join check, group namespaces, the backends' own keys) is
// the TCP store, served by rank 0 on a port the kernel picks and announced
// to the other ranks with one MPI broadcast, so no MASTER_ADDR/MASTER_PORT.
// Initializing MPI here is the cost the MPI backend would pay anyway.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/rendezvous_adapter.hpp"
#include "dist/cpp/status.hpp"
#include "dist/rendezvous_plugin.h"
#include "plugins/backends/mpi/flavor.h"
#include "plugins/rendezvous/common/plugin_support.h"
#include "plugins/rendezvous/common/ranks.h"
#include "plugins/rendezvous/common/tcp_rendezvous.h"
#include "plugins/rendezvous/common/url.h"
#include "plugins/rendezvous/mpi/mpi_world.h"

namespace dist::rendezvous {
namespace {

namespace flavor = dist_mpi_flavor;

const char* const kSchemes[] = {flavor::kName, nullptr};

// The broadcast message: "ok HOST PORT" or "error WHY".
constexpr char kOk[] = "ok ";
constexpr char kError[] = "error ";

// An IPv4 address of this host that other hosts can reach: the first
// interface that is up and not loopback. Empty when there is none.
std::string ReachableAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {0};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

absl::Status ResolveMpi(const char* text, const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                        dist_rendezvous_result_t* result) {
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

  DIST_RETURN_IF_ERROR(mpi::EnsureMpi());
  absl::StatusOr<mpi::WorldPlace> world = mpi::World();
  if (!world.ok()) return world.status();
  const int32_t hint_rank = hints != nullptr ? hints->rank : -1;
  const int32_t hint_size = hints != nullptr ? hints->world_size : -1;
  if ((hint_rank >= 0 && hint_rank != world->rank) || (hint_size > 0 && hint_size != world->size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(url->text, ": the caller says rank ", hint_rank, " of ", hint_size,
                     " but MPI_COMM_WORLD says rank ", world->rank, " of ", world->size,
                     "; leave rank and world size unset with mpi://, or use env:// or tcp://"));
  }
  // Local rank and size from the launcher's variables; rank and size from MPI.
  dist_rendezvous_hints_t mpi_hints{};
  mpi_hints.struct_size = sizeof(mpi_hints);
  mpi_hints.rank = world->rank;
  mpi_hints.world_size = world->size;
  absl::StatusOr<RankInfo> ranks = ResolveRanks(*url, *query, &mpi_hints);
  if (!ranks.ok()) return ranks.status();

  TcpRendezvousConfig config;
  config.url = url->text;
  config.component = flavor::kName;
  config.rank = world->rank;
  config.token = StoreToken(hints);
  config.timeout = absl::Milliseconds(timeout_ms);

  if (world->rank == 0) {
    // One host: loopback only. Several: every interface, announced as
    // MASTER_ADDR when set (the torch convention for "rank 0's address"),
    // else this host's first non-loopback address.
    if (ranks->local_world_size == world->size) {
      config.host = "127.0.0.1";
      config.bind = "127.0.0.1";
    } else {
      const char* master = getenv("MASTER_ADDR");
      config.host = master != nullptr && *master != '\0' ? master : ReachableAddress();
      config.bind = "";
      if (config.host.empty()) {
        absl::Status why = absl::FailedPreconditionError(
            absl::StrCat(url->text,
                         ": rank 0 has no non-loopback IPv4 address for the other hosts to reach "
                         "its store; set MASTER_ADDR to rank 0's address"));
        std::string message = absl::StrCat(kError, why.message());
        (void)mpi::Broadcast(&message, deadline);
        return why;
      }
    }
    config.port = 0;  // the kernel picks a free one
    absl::StatusOr<store::TcpStoreServerLimits> limits = StoreLimits(hints);
    if (!limits.ok()) {
      std::string message = absl::StrCat(kError, limits.status().message());
      (void)mpi::Broadcast(&message, deadline);
      return limits.status();
    }
    config.limits = *limits;
    bool announced = false;
    config.announce = [&](const std::string& host, int port) -> absl::Status {
      announced = true;
      std::string message = absl::StrCat(kOk, host, " ", port);
      absl::Status sent = mpi::Broadcast(&message, deadline);
      if (absl::IsDeadlineExceeded(sent)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank 0 of ", world->size, " could not announce its store within ", timeout_ms,
            " ms: ", sent.message(), " (is every rank calling dist_init?)"));
      }
      return sent;
    };
    absl::StatusOr<dist_store_t*> store = OpenTcpStore(config);
    if (!store.ok()) {
      if (!announced) {
        std::string message = absl::StrCat(kError, store.status().message());
        (void)mpi::Broadcast(&message, deadline);
      }
      return store.status();
    }
    FillResult(*ranks, *store, result);
    return absl::OkStatus();
  }

  std::string message;
  absl::Status received = mpi::Broadcast(&message, deadline);
  if (absl::IsDeadlineExceeded(received)) {
    return absl::DeadlineExceededError(
        absl::StrCat(url->text, ": rank ", world->rank, " of ", world->size,
                     " got no store address from "
                     "rank 0 within ",
                     timeout_ms, " ms (", received.message(),
                     "); is rank 0 calling dist_init? raise DIST_TIMEOUT if it starts late"));
  }
  DIST_RETURN_IF_ERROR(received);
  if (message.rfind(kError, 0) == 0) {
    return absl::UnavailableError(absl::StrCat(
        url->text, ": rank 0 failed to host the store: ", message.substr(sizeof(kError) - 1)));
  }
  std::vector<std::string> parts = absl::StrSplit(message, ' ');
  int port = 0;
  if (parts.size() != 3 || parts[0] != "ok" || !absl::SimpleAtoi(parts[2], &port)) {
    return absl::InternalError(absl::StrCat(url->text, ": malformed announcement from rank 0: '",
                                            message, "' (mixed dist versions?)"));
  }
  config.host = parts[1];
  config.port = port;
  absl::StatusOr<dist_store_t*> store = OpenTcpStore(config);
  if (!store.ok()) return store.status();
  FillResult(*ranks, *store, result);
  return absl::OkStatus();
}

}  // namespace
}  // namespace dist::rendezvous

DIST_EXPORT_RENDEZVOUS_PLUGIN(dist_mpi_flavor::kName, dist::rendezvous::kSchemes,
                              dist::rendezvous::ResolveMpi)

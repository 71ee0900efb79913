#include "plugins/rendezvous/mpi/store_announcement.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dist/cpp/status.hpp"
#include "plugins/rendezvous/mpi/mpi_world.h"
#include "plugins/rendezvous/mpi/reachable_address.h"

namespace dist::rendezvous {
namespace {

// The broadcast message: "ok HOST PORT" or "error WHY".
constexpr char kOk[] = "ok ";
constexpr char kError[] = "error ";

}  // namespace

absl::StatusOr<dist_store_t*> HostAndAnnounce(TcpRendezvousConfig config, bool one_host,
                                              int world_size, const dist_rendezvous_hints_t* hints,
                                              int64_t timeout_ms, absl::Time deadline) {
  // One host: loopback only. Several: every interface, announced as
  // MASTER_ADDR when set (the torch convention for "rank 0's address"),
  // else this host's first non-loopback address.
  if (one_host) {
    config.host = "127.0.0.1";
    config.bind = "127.0.0.1";
  } else {
    const char* master = getenv("MASTER_ADDR");
    config.host = master != nullptr && *master != '\0' ? master : ReachableAddress();
    config.bind = "";
    if (config.host.empty()) {
      absl::Status why = absl::FailedPreconditionError(
          absl::StrCat(config.url,
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
      return absl::DeadlineExceededError(
          absl::StrCat("rank 0 of ", world_size, " could not announce its store within ",
                       timeout_ms, " ms: ", sent.message(), " (is every rank calling dist_init?)"));
    }
    return sent;
  };
  absl::StatusOr<dist_store_t*> store = OpenTcpStore(config);
  if (!store.ok() && !announced) {
    std::string message = absl::StrCat(kError, store.status().message());
    (void)mpi::Broadcast(&message, deadline);
  }
  return store;
}

absl::StatusOr<dist_store_t*> JoinAnnounced(TcpRendezvousConfig config, int rank, int world_size,
                                            int64_t timeout_ms, absl::Time deadline) {
  std::string message;
  absl::Status received = mpi::Broadcast(&message, deadline);
  if (absl::IsDeadlineExceeded(received)) {
    return absl::DeadlineExceededError(
        absl::StrCat(config.url, ": rank ", rank, " of ", world_size,
                     " got no store address from "
                     "rank 0 within ",
                     timeout_ms, " ms (", received.message(),
                     "); is rank 0 calling dist_init? raise DIST_TIMEOUT if it starts late"));
  }
  DIST_RETURN_IF_ERROR(received);
  if (message.rfind(kError, 0) == 0) {
    return absl::UnavailableError(absl::StrCat(
        config.url, ": rank 0 failed to host the store: ", message.substr(sizeof(kError) - 1)));
  }
  std::vector<std::string> parts = absl::StrSplit(message, ' ');
  int port = 0;
  if (parts.size() != 3 || parts[0] != "ok" || !absl::SimpleAtoi(parts[2], &port)) {
    return absl::InternalError(absl::StrCat(config.url, ": malformed announcement from rank 0: '",
                                            message, "' (mixed dist versions?)"));
  }
  config.host = parts[1];
  config.port = port;
  return OpenTcpStore(config);
}

}  // namespace dist::rendezvous

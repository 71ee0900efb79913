#include "tools/distbench/baseline_store.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"
#include "dist/registry.h"
#include "tools/distbench/group_util.h"

namespace distbench {
namespace {

// A port nobody listens on now (the kernel picks it); the rendezvous binds
// it again a moment later, as torchrun and distrun do with MASTER_PORT.
absl::StatusOr<int> FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::UnavailableError("socket() failed while looking for a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t length = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    close(fd);
    return absl::UnavailableError("cannot bind a free TCP port for the baseline store");
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace

std::string RankZeroAddress(const BaselineSetup& setup) {
  if (const char* master = std::getenv("MASTER_ADDR"); master != nullptr && *master != '\0') {
    return master;
  }
  if (setup.local_world_size > 0 && setup.local_world_size == setup.world_size) {
    return "127.0.0.1";
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return "127.0.0.1";
  return host;
}

absl::StatusOr<std::unique_ptr<OwnedStore>> MakeBaselineStore(const BaselineSetup& setup) {
  std::string base;
  if (setup.rank == 0) {
    absl::StatusOr<int> port = FreePort();
    // An empty string tells the other ranks that rank 0 failed.
    if (port.ok()) base = absl::StrCat("tcp://", RankZeroAddress(setup), ":", *port);
  }
  absl::StatusOr<std::string> shared = BroadcastString(setup.pg, setup.device, base);
  if (!shared.ok()) return shared.status();
  if (shared->empty()) {
    return absl::UnavailableError("rank 0 found no free TCP port for the baseline store");
  }
  const std::string url =
      absl::StrCat(*shared, "?rank=", setup.rank, "&world_size=", setup.world_size);
  dist_rendezvous_hints_t hints{};
  hints.struct_size = sizeof(hints);
  hints.rank = setup.rank;
  hints.world_size = setup.world_size;
  dist_rendezvous_result_t result{};
  result.struct_size = sizeof(result);
  // Every rank is already up (the group exists), so meeting takes moments;
  // a short bound keeps a lost race for the port from stalling the run.
  const int64_t timeout_ms = std::min<int64_t>(setup.timeout_ms, 60000);
  absl::Status status = dist::TakeError(dist_rendezvous(url.c_str(), &hints, timeout_ms, &result));
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("baseline store at ", url, ": ", status.message()));
  }
  return std::make_unique<OwnedStore>(result.store);
}

}  // namespace distbench

#include "plugins/backends/gloo/local_pairs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

#include "plugins/backends/gloo/pair_access.h"

namespace dist_gloo {

bool BothEndsOnThisHost(int fd) {
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_length = sizeof(local);
  socklen_t peer_length = sizeof(peer);
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0 ||
      local.ss_family != peer.ss_family) {
    return false;
  }
  if (peer.ss_family == AF_INET) {
    const in_addr& own = reinterpret_cast<const sockaddr_in&>(local).sin_addr;
    const in_addr& other = reinterpret_cast<const sockaddr_in&>(peer).sin_addr;
    const bool loopback = (ntohl(other.s_addr) >> 24) == 127;  // 127.0.0.0/8
    return loopback || own.s_addr == other.s_addr;
  }
  if (peer.ss_family == AF_INET6) {
    const in6_addr& own = reinterpret_cast<const sockaddr_in6&>(local).sin6_addr;
    const in6_addr& other = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&other) || std::memcmp(&own, &other, sizeof(other)) == 0;
  }
  return false;
}

bool StopPacing(int fd) {
  char name[32] = {};  // TCP_CA_NAME_MAX is 16
  socklen_t length = sizeof(name) - 1;
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return false;
  if (std::strncmp(name, "bbr", 3) != 0) return false;
  static constexpr char kReno[] = "reno";
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, kReno, sizeof(kReno) - 1) == 0;
}

std::vector<bool> PeersOnThisHost(gloo::Context& context) {
  std::vector<bool> local(static_cast<size_t>(context.size), false);
  for (int rank = 0; rank < context.size; ++rank) {
    local[rank] = BothEndsOnThisHost(PairSocket(context, rank));
  }
  return local;
}

int StopPacingOnThisHost(gloo::Context& context) {
  int changed = 0;
  for (int rank = 0; rank < context.size; ++rank) {
    const int fd = PairSocket(context, rank);
    if (BothEndsOnThisHost(fd) && StopPacing(fd)) ++changed;
  }
  return changed;
}

}  // namespace dist_gloo

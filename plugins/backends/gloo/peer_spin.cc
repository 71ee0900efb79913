#include "plugins/backends/gloo/peer_spin.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "dist/cpp/job_cpus.hpp"
#include "gloo/transport/tcp/pair.h"

namespace dist_gloo {
namespace {

// A message this small arrives in one piece (loopback's segments are 64
// KiB; a NIC's are smaller, but then the first piece is what matters).
constexpr size_t kOneSegmentBytes = 16 << 10;
// The header Gloo's tcp transport sends before each message's payload.
constexpr size_t kGlooHeaderBytes = sizeof(gloo::transport::tcp::Op{}.preamble);

int64_t MonotonicNanos() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

}  // namespace

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
    return (ntohl(other.s_addr) >> 24) == 127 || own.s_addr == other.s_addr;
  }
  if (peer.ss_family == AF_INET6) {
    const in6_addr& own = reinterpret_cast<const sockaddr_in6&>(local).sin6_addr;
    const in6_addr& other = reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&other) || std::memcmp(&own, &other, sizeof(other)) == 0;
  }
  return false;
}

PeerSpin::PeerSpin(std::vector<int> sockets, absl::Duration budget) : sockets_(std::move(sockets)) {
  int on_this_host = 1;  // this rank
  for (int fd : sockets_) {
    if (BothEndsOnThisHost(fd)) ++on_this_host;
  }
  if (on_this_host <= dist::JobCpus()) budget_ns_ = absl::ToInt64Nanoseconds(budget);
  now_ns_ = budget_ns_;
}

void PeerSpin::AwaitData(int peer, size_t message_bytes) {
  if (budget_ns_ <= 0 || peer < 0 || static_cast<size_t>(peer) >= sockets_.size()) return;
  pollfd socket = {sockets_[peer], POLLIN, 0};
  if (socket.fd < 0) return;
  const int64_t start = MonotonicNanos();
  do {
    if (poll(&socket, 1, 0) != 0) break;  // data, a hang-up or an error
  } while (MonotonicNanos() - start < now_ns_);
  now_ns_ = socket.revents != 0 ? std::min(budget_ns_, now_ns_ * 2)
                                : std::max(budget_ns_ / 16, now_ns_ / 2);
  if (message_bytes <= kOneSegmentBytes || socket.revents != POLLIN) return;
  // The whole message, Gloo's header first, as far as the socket's
  // receive buffer can hold it (a quarter: the kernel counts its own
  // bookkeeping against the buffer too).
  int buffer = 0;
  socklen_t length = sizeof(buffer);
  if (getsockopt(socket.fd, SOL_SOCKET, SO_RCVBUF, &buffer, &length) != 0) return;
  const size_t want = std::min(message_bytes + kGlooHeaderBytes, static_cast<size_t>(buffer) / 4);
  const int64_t budget = budget_ns_ + static_cast<int64_t>(message_bytes / 2);  // 2 GB/s
  int queued = 0;
  while (ioctl(socket.fd, FIONREAD, &queued) == 0 && static_cast<size_t>(queued) < want &&
         MonotonicNanos() - start < budget) {
  }
}

}  // namespace dist_gloo

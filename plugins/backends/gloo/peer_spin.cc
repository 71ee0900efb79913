#include "plugins/backends/gloo/peer_spin.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "dist/cpp/job_cpus.hpp"

namespace dist_gloo {
namespace {

// A message this small arrives in one piece (loopback's segments are 64
// KiB; a NIC's are smaller, but then the first piece is what matters).
constexpr size_t kOneSegmentBytes = 16 << 10;

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

bool PeerSpin::AwaitData(int peer, size_t message_bytes) {
  if (budget_ns_ <= 0 || peer < 0 || static_cast<size_t>(peer) >= sockets_.size()) return false;
  pollfd socket = {sockets_[peer], POLLIN, 0};
  if (socket.fd < 0) return false;
  const int64_t start = MonotonicNanos();
  do {
    if (poll(&socket, 1, 0) != 0) break;  // data, a hang-up or an error
  } while (MonotonicNanos() - start < now_ns_);
  now_ns_ = socket.revents != 0 ? std::min(budget_ns_, now_ns_ * 2)
                                : std::max(budget_ns_ / 16, now_ns_ / 2);
  return message_bytes > kOneSegmentBytes && socket.revents == POLLIN;
}

AwakeRead::AwakeRead(gloo::transport::Pair* pair) : pair_(pair) {
  if (pair_ != nullptr) pair_->setSync(/*sync=*/true, /*busyPoll=*/true);
}

void ReceiveFrom(PeerSpin* spin, int peer, size_t bytes, gloo::transport::Pair& pair,
                 gloo::transport::Buffer& recv) {
  const bool arriving = spin != nullptr && spin->AwaitData(peer, bytes);
  AwakeRead awake(arriving ? &pair : nullptr);
  recv.waitRecv();
}

AwakeRead::~AwakeRead() {
  if (pair_ == nullptr) return;
  try {
    pair_->setSync(/*sync=*/true, /*busyPoll=*/false);
  } catch (...) {  // the pair failed meanwhile: the read has said so already
  }
}

}  // namespace dist_gloo

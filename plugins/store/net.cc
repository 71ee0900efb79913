#include "plugins/store/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "plugins/store/protocol.h"
#include "support/descriptors.h"

namespace dist::store {

std::string FormatHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

std::string SocketAddress::ToString() const {
  char text[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (storage.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = ntohs(in6->sin6_port);
  } else {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = ntohs(in->sin_port);
  }
  return FormatHostPort(text, port);
}

absl::StatusOr<std::vector<SocketAddress>> Resolve(const std::string& host, int port,
                                                   bool passive) {
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve host '", host,
                                               "': ", gai_strerror(rc),
                                               "; check the host name in the URL or MASTER_ADDR"));
  }
  std::vector<SocketAddress> out;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    SocketAddress address;
    std::memset(&address.storage, 0, sizeof(address.storage));
    std::memcpy(&address.storage, ai->ai_addr, ai->ai_addrlen);
    address.length = ai->ai_addrlen;
    out.push_back(address);
  }
  freeaddrinfo(list);
  if (out.empty()) {
    return absl::UnavailableError(absl::StrCat("host '", host, "' has no IPv4 or IPv6 address"));
  }
  return out;
}

namespace {

int RemainingMs(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

std::string ErrnoText(int error) { return strerror(error); }

bool IsPeerGone(int error) {
  return error == ECONNRESET || error == EPIPE || error == ECONNABORTED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Connection>> Connection::Connect(const SocketAddress& address,
                                                                absl::Time deadline) {
  const int fd = socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int error = errno;
    if (error == EMFILE) {  // this process's table is full: say who holds it
      return absl::ResourceExhaustedError(absl::StrCat("socket(): ", ErrnoText(error), ": ",
                                                       support::DescribeDescriptors(),
                                                       "; raise the open-files limit (ulimit -n)"));
    }
    return absl::UnavailableError(absl::StrCat("socket(): ", ErrnoText(error)));
  }
  std::unique_ptr<Connection> connection(new Connection(fd));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    if (errno != EINPROGRESS) {
      return absl::UnavailableError(ErrnoText(errno));
    }
    absl::Status polled = connection->Poll(POLLOUT, deadline);
    if (!polled.ok()) return polled;
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return absl::UnavailableError(ErrnoText(error));
  }
  return connection;
}

Connection::~Connection() { close(fd_); }

absl::Status Connection::Poll(short events, absl::Time deadline) {
  while (true) {
    pollfd entry = {fd_, events, 0};
    const int rc = poll(&entry, 1, RemainingMs(deadline));
    if (rc > 0) return absl::OkStatus();  // errors surface in the next call
    if (rc == 0) return absl::DeadlineExceededError("timed out");
    if (errno != EINTR) return absl::UnavailableError(ErrnoText(errno));
  }
}

absl::Status Connection::SendAll(const std::string& bytes, absl::Time deadline) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      absl::Status polled = Poll(POLLOUT, deadline);
      if (!polled.ok()) return polled;
      continue;
    }
    const int error = errno;
    closed_by_peer_ = closed_by_peer_ || IsPeerGone(error);
    return absl::UnavailableError(ErrnoText(error));
  }
  return absl::OkStatus();
}

bool Connection::PeerClosed() {
  if (input_.size() > consumed_) return false;
  char byte;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

absl::Status Connection::Fill(size_t want, absl::Time deadline) {
  while (input_.size() - consumed_ < want) {
    // A response is never there right after the request went out: wait
    // first, then read whatever has arrived (header and body together).
    absl::Status polled = Poll(POLLIN, deadline);
    if (!polled.ok()) return polled;
    if (consumed_ > 0) {
      input_.erase(0, consumed_);
      consumed_ = 0;
    }
    const size_t have = input_.size();
    const size_t chunk = std::max<size_t>(64 * 1024, want - have);
    input_.resize(have + chunk);
    const ssize_t n = recv(fd_, input_.data() + have, chunk, 0);
    const int error = errno;
    input_.resize(have + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) bytes_received_ += static_cast<uint64_t>(n);
    if (n == 0) {
      closed_by_peer_ = true;
      return absl::UnavailableError("connection closed by the server");
    }
    if (n < 0 && error != EAGAIN && error != EWOULDBLOCK && error != EINTR) {
      closed_by_peer_ = closed_by_peer_ || IsPeerGone(error);
      return absl::UnavailableError(ErrnoText(error));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Connection::ReceiveFrame(size_t max_bytes, absl::Time deadline) {
  absl::Status status = Fill(protocol::kFrameHeaderBytes, deadline);
  if (!status.ok()) return status;
  const uint32_t length = protocol::DecodeLength(input_.data() + consumed_);
  if (length > max_bytes) {
    return absl::DataLossError(absl::StrCat("server sent a frame of ", length, " bytes (limit ",
                                            max_bytes, "); is this port really a dist store?"));
  }
  status = Fill(protocol::kFrameHeaderBytes + length, deadline);
  if (!status.ok()) return status;
  std::string payload = input_.substr(consumed_ + protocol::kFrameHeaderBytes, length);
  consumed_ += protocol::kFrameHeaderBytes + length;
  return payload;
}

}  // namespace dist::store

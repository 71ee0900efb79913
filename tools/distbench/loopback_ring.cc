#include "tools/distbench/loopback_ring.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace distbench {
namespace {

// What a connecting rank writes first: this magic and its rank, so that
// the acceptor knows its left neighbour from a stray connection.
constexpr uint32_t kHelloMagic = 0x64697374;  // "dist"
struct Hello {
  uint32_t magic;
  int32_t rank;
};

// Closes the descriptor unless released.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

std::string Errno(int error) { return std::strerror(error); }

// Waits until `fd` is ready for `events` (or has failed, which the next
// call reports). DeadlineExceeded once `deadline` has passed.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("");
    const double ms = std::ceil(absl::ToDoubleMilliseconds(left));
    pollfd p{fd, events, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<double>(ms, INT_MAX)));
    if (ready > 0) return absl::OkStatus();
    if (ready < 0 && errno != EINTR)
      return absl::UnavailableError(absl::StrCat("poll: ", Errno(errno)));
  }
}

// Sends `bytes` from `data` (`len` bytes, from its start again at its end)
// to `peer` ("rank 3") on a non-blocking socket.
absl::Status SendStream(int fd, const char* data, size_t len, uint64_t bytes, absl::Time deadline,
                        absl::string_view peer) {
  uint64_t sent = 0;
  while (sent < bytes) {
    const size_t at = static_cast<size_t>(sent % len);
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes - sent, len - at));
    const ssize_t n = send(fd, data + at, chunk, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      absl::Status waited = WaitFor(fd, POLLOUT, deadline);
      if (absl::IsDeadlineExceeded(waited)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "loopback_tcp: ", peer, " took no more bytes before the deadline (", sent, " of ",
            bytes,
            " sent); it is stopped, overloaded or dead: check it, or raise --timeout if it "
            "is only slow"));
      }
      if (!waited.ok()) return waited;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("loopback_tcp: sending to ", peer, ": ",
                                               Errno(errno), " (", sent, " of ", bytes,
                                               " bytes sent); see that rank's own error"));
  }
  return absl::OkStatus();
}

// Receives `bytes` from `peer` into `data` (`len` bytes, from its start
// again at its end) on a non-blocking socket.
absl::Status ReceiveStream(int fd, char* data, size_t len, uint64_t bytes, absl::Time deadline,
                           absl::string_view peer) {
  uint64_t received = 0;
  while (received < bytes) {
    const size_t at = static_cast<size_t>(received % len);
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes - received, len - at));
    const ssize_t n = recv(fd, data + at, chunk, 0);
    if (n > 0) {
      received += static_cast<uint64_t>(n);
      continue;
    }
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat("loopback_tcp: ", peer, " closed its connection (",
                                                 received, " of ", bytes,
                                                 " bytes arrived); see that rank's own "
                                                 "error"));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      absl::Status waited = WaitFor(fd, POLLIN, deadline);
      if (absl::IsDeadlineExceeded(waited)) {
        return absl::DeadlineExceededError(
            absl::StrCat("loopback_tcp: ", peer, " sent nothing more before the deadline (",
                         received, " of ", bytes,
                         " bytes arrived); it is stopped, overloaded or dead: check it, or raise "
                         "--timeout if it is only slow"));
      }
      if (!waited.ok()) return waited;
      continue;
    }
    return absl::UnavailableError(absl::StrCat("loopback_tcp: receiving from ", peer, ": ",
                                               Errno(errno), " (", received, " of ", bytes,
                                               " bytes arrived); see that rank's own error"));
  }
  return absl::OkStatus();
}

// The gloo plugin's socket options: a large send buffer, so that a write
// does not wait for the peer's acknowledgement of the one before, and no
// Nagle delay. Returns SO_SNDBUF as the kernel reports it, or 0.
int ConfigureSocket(int fd, int send_buffer_bytes) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer_bytes, sizeof(send_buffer_bytes));
  int granted = 0;
  socklen_t length = sizeof(granted);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &granted, &length) != 0) return 0;
  return granted;
}

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// Connects to 127.0.0.1:`port` and says who this is.
absl::StatusOr<Fd> ConnectTo(int rank, int peer, int port, absl::Time deadline) {
  const std::string who = absl::StrCat("rank ", peer, " at 127.0.0.1:", port);
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    return absl::UnavailableError(absl::StrCat("loopback_tcp: socket(): ", Errno(errno)));
  }
  const sockaddr_in addr = Loopback(port);
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      return absl::UnavailableError(
          absl::StrCat("loopback_tcp: connecting to ", who, ": ", Errno(errno)));
    }
    absl::Status waited = WaitFor(fd.get(), POLLOUT, deadline);
    if (absl::IsDeadlineExceeded(waited)) {
      return absl::DeadlineExceededError(
          absl::StrCat("loopback_tcp: ", who, " did not take the connection in time"));
    }
    if (!waited.ok()) return waited;
    int error = 0;
    socklen_t length = sizeof(error);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    if (error != 0) {
      return absl::UnavailableError(
          absl::StrCat("loopback_tcp: connecting to ", who, ": ", Errno(error)));
    }
  }
  const Hello hello{kHelloMagic, rank};
  absl::Status said = SendStream(fd.get(), reinterpret_cast<const char*>(&hello), sizeof(hello),
                                 sizeof(hello), deadline, who);
  if (!said.ok()) return said;
  return fd;
}

// Accepts connections on `listener` until one says it is rank `peer`.
absl::StatusOr<Fd> AcceptFrom(const LoopbackListener& listener, int peer, absl::Time deadline) {
  const std::string who = absl::StrCat("rank ", peer);
  while (true) {
    Fd fd(accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return absl::UnavailableError(absl::StrCat("loopback_tcp: accept: ", Errno(errno)));
      }
      absl::Status waited = WaitFor(listener.fd(), POLLIN, deadline);
      if (absl::IsDeadlineExceeded(waited)) {
        return absl::DeadlineExceededError(
            absl::StrCat("loopback_tcp: ", who, " did not connect to 127.0.0.1:", listener.port(),
                         " in time; see its own error"));
      }
      if (!waited.ok()) return waited;
      continue;
    }
    Hello hello{};
    absl::Status heard = ReceiveStream(fd.get(), reinterpret_cast<char*>(&hello), sizeof(hello),
                                       sizeof(hello), deadline, who);
    if (absl::IsDeadlineExceeded(heard)) {
      return absl::DeadlineExceededError(
          absl::StrCat("loopback_tcp: waiting for ", who, " on 127.0.0.1:", listener.port(),
                       ": a connection came but did not say who it is before the deadline; is "
                       "something else connecting to this port?"));
    }
    // Anything else than the neighbour is not ours: close it and go on.
    if (heard.ok() && hello.magic == kHelloMagic && hello.rank == peer) return fd;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoopbackListener>> LoopbackListener::Open() {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    return absl::UnavailableError(absl::StrCat("loopback_tcp: socket(): ", Errno(errno)));
  }
  sockaddr_in addr = Loopback(0);
  socklen_t length = sizeof(addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd.get(), 8) != 0 ||
      getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    return absl::UnavailableError(
        absl::StrCat("loopback_tcp: cannot listen on 127.0.0.1: ", Errno(errno)));
  }
  const int port = ntohs(addr.sin_port);
  return std::unique_ptr<LoopbackListener>(new LoopbackListener(fd.release(), port));
}

LoopbackListener::~LoopbackListener() { close(fd_); }

absl::StatusOr<std::unique_ptr<LoopbackRing>> LoopbackRing::Connect(int rank, int world_size,
                                                                    const std::vector<int>& ports,
                                                                    LoopbackListener& listener,
                                                                    int send_buffer_bytes,
                                                                    absl::Duration timeout) {
  if (world_size < 2 || rank < 0 || rank >= world_size ||
      static_cast<int>(ports.size()) != world_size) {
    return absl::InvalidArgumentError(absl::StrCat("loopback_tcp: no ring of rank ", rank, " in ",
                                                   world_size, " with ", ports.size(), " ports"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  const int right = (rank + 1) % world_size;
  const int left = (rank + world_size - 1) % world_size;
  // On 2 ranks right and left are the same peer: rank 0 connects, rank 1
  // accepts, and the one connection carries both directions. Connecting
  // first cannot wait for the peer's accept (the kernel completes it from
  // the listen queue), so no rank waits for one that waits for it.
  Fd right_fd;
  Fd left_fd;
  if (!(world_size == 2 && rank == 1)) {
    absl::StatusOr<Fd> connected = ConnectTo(rank, right, ports[right], deadline);
    if (!connected.ok()) return connected.status();
    right_fd = std::move(*connected);
  }
  if (!(world_size == 2 && rank == 0)) {
    absl::StatusOr<Fd> accepted = AcceptFrom(listener, left, deadline);
    if (!accepted.ok()) return accepted.status();
    left_fd = std::move(*accepted);
  }
  const int right_raw = right_fd.get() >= 0 ? right_fd.get() : left_fd.get();
  const int left_raw = left_fd.get() >= 0 ? left_fd.get() : right_fd.get();
  int granted = ConfigureSocket(right_raw, send_buffer_bytes);
  if (left_raw != right_raw)
    granted = std::min(granted, ConfigureSocket(left_raw, send_buffer_bytes));
  right_fd.release();
  left_fd.release();
  return std::unique_ptr<LoopbackRing>(
      new LoopbackRing(rank, world_size, right_raw, left_raw, granted));
}

LoopbackRing::~LoopbackRing() {
  close(right_fd_);
  if (left_fd_ != right_fd_) close(left_fd_);
}

void LoopbackRing::ShutDown() {
  // Tells the neighbours at once (they read the end of the stream) instead
  // of at their deadline.
  shutdown(right_fd_, SHUT_RDWR);
  if (left_fd_ != right_fd_) shutdown(left_fd_, SHUT_RDWR);
  broken_ = true;
}

absl::Status LoopbackRing::Shift(const void* send, size_t send_len, void* recv, size_t recv_len,
                                 uint64_t bytes, absl::Duration timeout, absl::Duration spin) {
  if (broken_) {
    return absl::FailedPreconditionError(
        "loopback_tcp: the ring failed in an earlier call and its streams are out of step; "
        "see that error");
  }
  if (bytes == 0) return absl::OkStatus();
  if (send == nullptr || recv == nullptr || send_len == 0 || recv_len == 0) {
    return absl::InvalidArgumentError("loopback_tcp: a shift of bytes needs both buffers");
  }
  const absl::Status status =
      Move(static_cast<const char*>(send), send_len, static_cast<char*>(recv), recv_len, bytes,
           absl::Now() + timeout, spin);
  if (!status.ok()) ShutDown();
  return status;
}

absl::Status LoopbackRing::Move(const char* send, size_t send_len, char* recv, size_t recv_len,
                                uint64_t bytes, absl::Time deadline, absl::Duration spin) {
  const std::string right = absl::StrCat("rank ", (rank_ + 1) % world_size_);
  const std::string left = absl::StrCat("rank ", (rank_ + world_size_ - 1) % world_size_);
  uint64_t sent = 0;
  uint64_t received = 0;
  // Since when neither direction has moved (spinning), or InfinitePast.
  absl::Time stuck_since = absl::InfinitePast();
  while (sent < bytes || received < bytes) {
    // One call each way in turn, as the plugin's ring writes a chunk to the
    // right and reads one from the left; neither waits, so both directions
    // stay in flight and the kernel moves each while this thread copies.
    bool moved = false;
    if (sent < bytes) {
      const size_t at = static_cast<size_t>(sent % send_len);
      const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - sent, send_len - at));
      const ssize_t done = ::send(right_fd_, send + at, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (done > 0) {
        sent += static_cast<uint64_t>(done);
        moved = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("loopback_tcp: sending to ", right, ": ",
                                                   Errno(errno), " (", sent, " of ", bytes,
                                                   " bytes sent); see that rank's own error"));
      }
    }
    if (received < bytes) {
      const size_t at = static_cast<size_t>(received % recv_len);
      const size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - received, recv_len - at));
      const ssize_t done = ::recv(left_fd_, recv + at, n, MSG_DONTWAIT);
      if (done > 0) {
        received += static_cast<uint64_t>(done);
        moved = true;
      } else if (done == 0) {
        return absl::UnavailableError(absl::StrCat(
            "loopback_tcp: ", left, " closed its connection (", received, " of ", bytes,
            " bytes arrived); see that rank's own "
            "error"));
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return absl::UnavailableError(absl::StrCat("loopback_tcp: receiving from ", left, ": ",
                                                   Errno(errno), " (", received, " of ", bytes,
                                                   " bytes arrived); see that rank's own error"));
      }
    }
    if (moved) {
      stuck_since = absl::InfinitePast();
      continue;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      // The receiving side names who is silent; else the sending side who
      // does not read.
      if (received < bytes) {
        return absl::DeadlineExceededError(
            absl::StrCat("loopback_tcp: ", left, " sent nothing more before the deadline (",
                         received, " of ", bytes,
                         " bytes arrived); it is stopped, overloaded or dead: check it, or raise "
                         "--timeout if it is only slow"));
      }
      return absl::DeadlineExceededError(absl::StrCat(
          "loopback_tcp: ", right, " took no more bytes before the deadline (", sent, " of ", bytes,
          " sent); it is stopped, overloaded or dead: check it, or raise --timeout if it "
          "is only slow"));
    }
    // Poll the sockets for up to `spin` before sleeping, as the plugin
    // does where every rank has a CPU of its own ("Waiting awake"): a
    // sleeping rank pays a wake-up per message.
    if (stuck_since == absl::InfinitePast()) stuck_since = now;
    if (now - stuck_since < spin) continue;
    pollfd waits[2];
    nfds_t count = 0;
    const short out = sent < bytes ? POLLOUT : 0;
    const short in = received < bytes ? POLLIN : 0;
    if (right_fd_ == left_fd_) {
      waits[count++] = {right_fd_, static_cast<short>(out | in), 0};
    } else {
      if (out != 0) waits[count++] = {right_fd_, out, 0};
      if (in != 0) waits[count++] = {left_fd_, in, 0};
    }
    const double ms = std::ceil(absl::ToDoubleMilliseconds(deadline - now));
    if (poll(waits, count, static_cast<int>(std::min<double>(ms, INT_MAX))) < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat("loopback_tcp: poll: ", Errno(errno)));
    }
    stuck_since = absl::InfinitePast();
  }
  return absl::OkStatus();
}

}  // namespace distbench

// Socket helpers for the TCP store client: name resolution and a blocking
// connection whose every read and write is bounded by a deadline.
#ifndef DIST_PLUGINS_STORE_NET_H_
#define DIST_PLUGINS_STORE_NET_H_

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace dist::store {

struct SocketAddress {
  sockaddr_storage storage;
  socklen_t length;
  std::string ToString() const;  // "1.2.3.4:5" or "[::1]:5"
};

// "host:port", with brackets around IPv6 literals.
std::string FormatHostPort(const std::string& host, int port);

// Every address of host:port (IPv4 and IPv6). `passive` asks for bindable
// addresses (an empty host then means the wildcard).
absl::StatusOr<std::vector<SocketAddress>> Resolve(const std::string& host, int port, bool passive);

// One TCP connection (TCP_NODELAY, non-blocking underneath so that every
// operation honours its deadline).
class Connection {
 public:
  // One connect attempt to `address`, giving up at `deadline`.
  static absl::StatusOr<std::unique_ptr<Connection>> Connect(const SocketAddress& address,
                                                             absl::Time deadline);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  absl::Status SendAll(const std::string& bytes, absl::Time deadline);
  // Whether the peer has closed (or reset) the connection, without waiting.
  bool PeerClosed();
  // Reads one frame's payload (length checked against `max_bytes`).
  absl::StatusOr<std::string> ReceiveFrame(size_t max_bytes, absl::Time deadline);
  // Bytes received over the connection's life: unchanged across a request
  // means that not one byte of its reply arrived.
  uint64_t bytes_received() const { return bytes_received_; }
  // Whether a send or receive failed because the peer closed or reset the
  // connection (not a timeout).
  bool closed_by_peer() const { return closed_by_peer_; }

 private:
  explicit Connection(int fd) : fd_(fd) {}
  // Reads until at least `want` unconsumed bytes are buffered.
  absl::Status Fill(size_t want, absl::Time deadline);
  // Waits until the socket is readable/writable; DeadlineExceeded on timeout.
  absl::Status Poll(short events, absl::Time deadline);
  int fd_;
  std::string input_;    // bytes received
  size_t consumed_ = 0;  // of input_, already returned
  uint64_t bytes_received_ = 0;
  bool closed_by_peer_ = false;
};

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_NET_H_

// A ring of plain TCP connections over 127.0.0.1 between the ranks of one
// host, and the ring shift that moves bytes over it: the transport alone,
// with nothing of a collective library on top, which distbench --ceiling
// times beside the plugin (ceiling.h).
//
// Plain POSIX sockets, non-blocking; every wait is a poll() bounded by the
// caller's deadline, so no call can hang on a silent or stopped peer.
// Not thread-safe: one thread per rank uses its ring.
#ifndef DIST_TOOLS_DISTBENCH_LOOPBACK_RING_H_
#define DIST_TOOLS_DISTBENCH_LOOPBACK_RING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace distbench {

// A listening socket on 127.0.0.1 at a port the kernel picks. Each rank
// opens one before the ranks exchange ports, so a neighbour's connect
// always finds it listening.
class LoopbackListener {
 public:
  static absl::StatusOr<std::unique_ptr<LoopbackListener>> Open();
  ~LoopbackListener();
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  LoopbackListener(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
};

class LoopbackRing {
 public:
  // Connects `rank` of `world_size` (2 or more) to its neighbours: a
  // connection to rank+1 at 127.0.0.1:ports[rank+1], and one accepted on
  // `listener` from rank-1 (each says its rank first; a connection that
  // does not is closed and the wait goes on). On 2 ranks the ranks share
  // one connection, both ways, as a Gloo pair does. Every socket asks for
  // a send buffer of `send_buffer_bytes` (SO_SNDBUF) and sends without
  // Nagle's delay (TCP_NODELAY), as the gloo plugin's pairs do. Every rank
  // calls it at about the same time; it fails after `timeout`.
  static absl::StatusOr<std::unique_ptr<LoopbackRing>> Connect(int rank, int world_size,
                                                               const std::vector<int>& ports,
                                                               LoopbackListener& listener,
                                                               int send_buffer_bytes,
                                                               absl::Duration timeout);
  ~LoopbackRing();  // closes both connections
  LoopbackRing(const LoopbackRing&) = delete;
  LoopbackRing& operator=(const LoopbackRing&) = delete;

  // Sends `bytes` to rank+1 while it receives as many from rank-1, both in
  // flight at once, as every step of a ring all_reduce: one thread, like
  // the plugin's ring, sends and receives in turn on non-blocking sockets,
  // each call at most what is left to its buffer's end, and waits in
  // poll() on both when neither moves (after polling the sockets for up to
  // `spin`). Reads from `send` (`send_len` bytes) and writes into `recv`
  // (`recv_len` bytes), each from its start again when its end is reached,
  // so the lengths bound the bytes per call. Fails after `timeout` naming
  // the neighbour that stalled; a ring that failed shuts its connections
  // (the neighbours learn it at once) and fails every later call.
  absl::Status Shift(const void* send, size_t send_len, void* recv, size_t recv_len, uint64_t bytes,
                     absl::Duration timeout, absl::Duration spin = absl::ZeroDuration());

  // The smallest send buffer a connection got, as the kernel reports it
  // (SO_SNDBUF: twice what it granted, for its own bookkeeping).
  int send_buffer_bytes() const { return send_buffer_bytes_; }

 private:
  LoopbackRing(int rank, int world_size, int right_fd, int left_fd, int send_buffer_bytes)
      : rank_(rank),
        world_size_(world_size),
        right_fd_(right_fd),
        left_fd_(left_fd),
        send_buffer_bytes_(send_buffer_bytes) {}
  absl::Status Move(const char* send, size_t send_len, char* recv, size_t recv_len, uint64_t bytes,
                    absl::Time deadline, absl::Duration spin);
  void ShutDown();

  int rank_;
  int world_size_;
  int right_fd_;  // to rank+1
  int left_fd_;   // from rank-1; the same socket as right_fd_ on 2 ranks
  int send_buffer_bytes_;
  bool broken_ = false;
};

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_LOOPBACK_RING_H_

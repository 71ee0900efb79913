// Bounds the socket waits of one run on the synchronous pairs by the run's
// deadline, not by one pair timeout per wait.
//
// Why: a synchronous pair waits in read() and writev() for as long as the
// socket's SO_RCVTIMEO/SO_SNDTIMEO (the pair timeout), and Gloo retries a
// partial transfer with a fresh wait. A run of many chunks, or a chunk
// written halfway into a stopped peer, could so take several pair timeouts:
// a 2 MiB broadcast into a SIGSTOPped rank failed 8.2-8.8 s after the stop
// with a 3 s timeout (tests/gloo:ring_failure_test). So before each send or
// receive of a run:
//   - it polls the socket until it can move bytes, at most until the
//     deadline (then the run fails with a timeout, on time);
//   - once it can, the socket timeouts are at most half of what is left, so
//     a transfer that stops halfway, and Gloo's retry of it, end by the
//     deadline too. They shrink in steps (a new value only when the old one
//     no longer fits), so a healthy run sets them once and restores them
//     once when it ends.
// A peer that stops halfway through a message can so make the run fail up
// to half of its time early; one that is merely late cannot.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_SOCKET_DEADLINE_H_
#define DIST_PLUGINS_BACKENDS_GLOO_SOCKET_DEADLINE_H_

#include <chrono>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dist_gloo {

class SocketDeadline {
 public:
  // `send_socket` (written to) and `recv_socket` (read from): descriptors
  // of the pairs' sockets, borrowed, -1 for none (then nothing is bounded
  // in that direction); both wait at most `pair_timeout` outside a run.
  SocketDeadline(int send_socket, int recv_socket, std::chrono::milliseconds pair_timeout)
      : send_socket_(send_socket), recv_socket_(recv_socket), pair_timeout_(pair_timeout) {}

  // One run, from now to now + the pair timeout; the socket timeouts are
  // restored when it ends, thrown or not.
  class Run {
   public:
    explicit Run(SocketDeadline& bound) : bound_(bound) {
      bound_.deadline_ = absl::Now() + absl::FromChrono(bound_.pair_timeout_);
    }
    ~Run() { bound_.Restore(); }
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

   private:
    SocketDeadline& bound_;
  };

  // Before each blocking send (receive) of the run. Throws gloo::IoException
  // ("Write timeout ...", "Read timeout ...") once the deadline has passed.
  void BeforeSend() { Await(send_socket_, /*for_read=*/false, &send_timeout_); }
  void BeforeReceive() { Await(recv_socket_, /*for_read=*/true, &recv_timeout_); }

 private:
  void Await(int socket, bool for_read, absl::Duration* timeout);
  void Restore();

  const int send_socket_;
  const int recv_socket_;
  const std::chrono::milliseconds pair_timeout_;
  absl::Time deadline_ = absl::InfiniteFuture();
  // What each socket waits now; infinite: the pair timeout, untouched.
  absl::Duration send_timeout_ = absl::InfiniteDuration();
  absl::Duration recv_timeout_ = absl::InfiniteDuration();
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_SOCKET_DEADLINE_H_

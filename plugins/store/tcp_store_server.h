// The TCP store server: one event loop (libuv) on its own thread serving any
// number of clients (like PyTorch's libuv TCPStore backend). Blocking gets
// and waits are parked on the server until their keys appear or the
// client's timeout passes, so no thread is held per waiting client.
//
// It is safe to expose to an untrusted network: clients prove that they
// hold the token (challenge-response, auth.h) before any request is read,
// and every resource a client can make it hold is bounded by an option
// below (connections, buffered bytes, parked requests, stored data), so a
// hostile client costs bounded memory and is dropped, while the job's own
// ranks are served. plugins/store/README.md lists the limits and the
// threat model.
#ifndef DIST_PLUGINS_STORE_TCP_STORE_SERVER_H_
#define DIST_PLUGINS_STORE_TCP_STORE_SERVER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/store/protocol.h"
#include "plugins/store/server_limits.h"

namespace dist::store {

struct TcpStoreServerOptions {
  // Address to listen on: an IP literal or a host name; "" listens on every
  // interface (IPv6 dual-stack, else IPv4).
  std::string bind_host;
  int port = 0;  // 0: the kernel picks one (read it back with port())
  // Shared secret; empty accepts every client (and, when listening beyond
  // loopback, logs one warning saying so).
  std::string token;
  TcpStoreServerLimits limits;
  // Receives one line per notable event (client dropped, refused token).
  std::function<void(const std::string&)> log;
  // Whether a rank's report that its rendezvous failed (the kFail request
  // its store sends from release_failed) ends this store: from then on every
  // new client is refused and every request is answered with
  // "tcp://HOST:PORT: the rendezvous on this store already failed: REASON;
  // start all ranks again". Rank 0's in-process server keeps failures: it
  // serves one job, and a late rank must not join a rendezvous that is over.
  // dist_store_server does not: it serves job after job, so a failed job
  // must not shut out the next one (it only logs the report).
  bool keep_failures = false;
  // Whether a server that does not keep failures logs each report. distrun
  // under --survive does not: there the ranks that lost a peer report it
  // as they exit, as expected, and distrun names the lost ranks itself.
  bool log_failure_reports = true;
  // The host clients dial (the URL's host or MASTER_ADDR), for the failure
  // message; empty: the address the server is bound to.
  std::string advertised_host;
};

class TcpStoreServer {
 public:
  // Binds and listens on the calling thread (so "address in use" is reported
  // here), then serves on a new thread.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(TcpStoreServerOptions options);
  ~TcpStoreServer();  // Stops.

  int port() const { return port_; }
  const std::string& address() const { return address_; }

  // Clients connected now that have sent a request. A connection that only
  // logged in is not counted: it is no rank still reading its last keys,
  // and a crowd of idle strangers must not hold rank 0 at its exit.
  int clients() const;
  // Waits until none of those is connected or `timeout` passes; true if
  // they all left.
  bool WaitForClientsToLeave(absl::Duration timeout);
  // Clients dropped for breaking the protocol or a wrong token (for tests
  // and the server binary's log).
  int64_t dropped_clients() const { return dropped_.load(); }
  int64_t requests_served() const { return served_.load(); }
  // The message every client now gets, once a rank reported a failed
  // rendezvous to a server that keeps failures; "" before that.
  std::string failure() const;

  // Serves an already connected socket as if it had been accepted (the
  // server takes ownership of `fd`). For fuzzing over a socketpair.
  void Adopt(int fd);

  void Stop();

  class Loop;  // event loop state, only touched on the loop thread

 private:
  TcpStoreServer() = default;

  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  int port_ = 0;
  std::string address_;
  mutable absl::Mutex mu_;
  int clients_ ABSL_GUARDED_BY(mu_) = 0;
  std::string failure_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> dropped_{0};
  std::atomic<int64_t> served_{0};
  bool stopped_ = false;

  friend class Loop;
};

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_TCP_STORE_SERVER_H_

// The TCP store server: a libuv event loop on its own thread serving any
// number of clients (like PyTorch's libuv TCPStore backend). Blocking gets
// and waits are parked on the server until their keys appear or the
// client's timeout passes, so no thread is held per waiting client.
#ifndef DIST_PLUGINS_STORE_TCP_STORE_SERVER_H_
#define DIST_PLUGINS_STORE_TCP_STORE_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dist::store {

struct TcpStoreServerOptions {
  // Address to listen on: an IP literal or a host name; "" listens on every
  // interface (IPv6 dual-stack, else IPv4).
  std::string bind_host;
  int port = 0;  // 0: the kernel picks one (read it back with port())
  // Shared secret; empty accepts every client.
  std::string token;
  // A connection that has not completed the hello by then is dropped, so
  // half-open or silent connections cannot pile up.
  absl::Duration hello_timeout = absl::Seconds(10);
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
  // The host clients dial (the URL's host or MASTER_ADDR), for the failure
  // message; empty: the address the server is bound to.
  std::string advertised_host;
};

class TcpStoreServer {
 public:
  // Binds and listens on the calling thread (so "address in use" is reported
  // here), then serves on a new thread.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(
      TcpStoreServerOptions options);
  ~TcpStoreServer();  // Stops.

  int port() const { return port_; }
  const std::string& address() const { return address_; }

  // Authenticated clients connected now.
  int clients() const;
  // Waits until no authenticated client is connected or `timeout` passes;
  // true if they all left.
  bool WaitForClientsToLeave(absl::Duration timeout);
  // Clients dropped for breaking the protocol or a wrong token (for tests
  // and the server binary's log).
  int64_t dropped_clients() const { return dropped_.load(); }
  int64_t requests_served() const { return served_.load(); }
  // The message every client now gets, once a rank reported a failed
  // rendezvous to a server that keeps failures; "" before that.
  std::string failure() const;

  void Stop();

  class Loop;  // libuv state, only touched on the loop thread

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

// The TCP store client. Thread-safe: each call borrows a connection from a
// small pool (opening one when all are busy), so a thread blocked in get()
// does not hold up the others.
#ifndef DIST_PLUGINS_STORE_TCP_STORE_CLIENT_H_
#define DIST_PLUGINS_STORE_TCP_STORE_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/store/net.h"
#include "plugins/store/protocol.h"
#include "plugins/store/store.h"

namespace dist::store {

struct TcpStoreClientOptions {
  std::string host;
  int port = 0;
  std::string token;
  // Bounds the first connection (retried with backoff until then) and every
  // request that has no timeout of its own.
  absl::Duration timeout = absl::Seconds(30);
  // Who this client is ("rank 1 on node2:4711"), appended to the reason
  // Abandon reports; empty: nothing appended.
  std::string reporter;
};

class TcpStoreClient : public Store {
 public:
  // Connects (retrying with backoff until options.timeout) and handshakes.
  static absl::StatusOr<std::unique_ptr<TcpStoreClient>> Connect(TcpStoreClientOptions options);
  ~TcpStoreClient() override;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;
  absl::StatusOr<std::string> CompareSet(const std::string& key,
                                         const std::optional<std::string>& expected,
                                         const std::string& desired) override;
  absl::StatusOr<bool> Remove(const std::string& key) override;
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::StatusOr<int64_t> NumKeys() override;
  // Tells the server that this rank's rendezvous failed (a kFail request
  // over a pooled connection, bounded by a short deadline; errors are
  // ignored: the caller is failing already). A server that keeps failures
  // (rank 0's) then refuses late ranks with the reason; servers older than
  // protocol version 2 are not told.
  void Abandon(const std::string& reason) override;

  // Closes every pooled connection (the server then sees this client leave).
  void Disconnect();
  const std::string& address() const { return address_; }

 private:
  explicit TcpStoreClient(TcpStoreClientOptions options);
  // A connected, authenticated connection: one from the pool (`*pooled`
  // set) or a new one.
  absl::StatusOr<std::unique_ptr<Connection>> Acquire(absl::Time deadline, bool* pooled);
  absl::StatusOr<std::unique_ptr<Connection>> Open(absl::Time deadline);
  // The version 3 handshake (protocol.h) on a new connection. `retry` says
  // whether another attempt may succeed (a lost connection, a full server)
  // or not (refused, or a server that cannot prove it holds the token).
  absl::Status Handshake(Connection& connection, absl::Time deadline, bool* retry);
  // Sends one request and returns the response body after its status code.
  // A request on a pooled connection that the server closed or reset before
  // any byte of the reply arrived is sent once more on a new connection.
  // `set_aside` (may be null) tells a response with protocol::kSetAsideCode
  // from every other error.
  absl::StatusOr<std::string> Call(std::string frame, absl::Time deadline,
                                   bool* set_aside = nullptr);
  // A get or wait: the op, then `fields`, then the time left in ms. Sent
  // again, for the time left, whenever the server sets it aside to make
  // room for a newer one.
  absl::StatusOr<std::string> CallWaiting(protocol::Op op, const std::string& fields,
                                          absl::Duration timeout);

  TcpStoreClientOptions options_;
  std::string address_;  // host:port, for messages
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  bool ever_connected_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_TCP_STORE_CLIENT_H_

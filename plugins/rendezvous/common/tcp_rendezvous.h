// The TCP store as tcp:// and env:// use it: rank 0 hosts the server in its
// own process (unless the server is external), every rank connects a client.
#ifndef DIST_PLUGINS_RENDEZVOUS_COMMON_TCP_RENDEZVOUS_H_
#define DIST_PLUGINS_RENDEZVOUS_COMMON_TCP_RENDEZVOUS_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/rendezvous_plugin.h"
#include "dist/store.h"
#include "plugins/store/server_limits.h"
#include "support/url.h"

namespace dist::rendezvous {

using support::Query;
using support::Url;

struct TcpRendezvousConfig {
  std::string url;        // for messages
  const char* component;  // "tcp" or "env", for log lines
  std::string host;
  int port = 0;
  int rank = 0;
  bool external = false;  // the store runs in dist_store_server
  // Where rank 0 listens: nullopt picks the default (the host when it is an
  // IP literal or "localhost", else every interface); "" or "*": everywhere.
  std::optional<std::string> bind;
  std::string token;
  absl::Duration timeout;
  // For the server rank 0 hosts (StoreLimits: the options "store.<name>").
  store::TcpStoreServerLimits limits;
  // Rank 0, once its server listens: told the address the others should
  // use (mpi:// broadcasts it). Its error fails the rendezvous.
  std::function<absl::Status(const std::string& host, int port)> announce;
};

// The limits of the server rank 0 hosts: the defaults, changed by the hint
// options "store.<name>" (config file table [store], e.g. max_connections =
// 100000); an unknown name or a bad value is an error naming it.
absl::StatusOr<store::TcpStoreServerLimits> StoreLimits(const dist_rendezvous_hints_t* hints);

// A store owned by the caller. For rank 0 its release lets the server
// linger (up to the timeout) until every other rank has disconnected.
absl::StatusOr<dist_store_t*> OpenTcpStore(const TcpRendezvousConfig& config);

// What tcp:// and env:// do once they know rank 0's address: rank and world
// size (hints > URL > environment), the store options of the query
// (external, bind) and the token, then the store, into `result`.
absl::Status ResolveOverTcpStore(const Url& url, const Query& query,
                                 const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                                 const char* component, const std::string& host, int port,
                                 dist_rendezvous_result_t* result);

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_COMMON_TCP_RENDEZVOUS_H_

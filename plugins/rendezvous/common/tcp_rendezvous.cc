#include "plugins/rendezvous/common/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "dist/cpp/host_log.hpp"
#include "plugins/rendezvous/common/plugin_support.h"
#include "plugins/rendezvous/common/ranks.h"
#include "plugins/store/abi_store.h"
#include "plugins/store/tcp_store_client.h"
#include "plugins/store/tcp_store_server.h"

namespace dist::rendezvous {
namespace {

bool IsIpLiteral(const std::string& host) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, host.c_str(), buffer) == 1;
}

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "*" || host == "0.0.0.0" || host == "::";
}

std::string BindHost(const TcpRendezvousConfig& config) {
  if (config.bind.has_value()) return *config.bind == "*" ? "" : *config.bind;
  if (IsIpLiteral(config.host) || config.host == "localhost") return config.host;
  return "";
}

absl::Status WithUrl(const std::string& url, const absl::Status& status) {
  // "tcp://HOST:PORT: the rendezvous on this store already failed: ..."
  // (a late rank refused by rank 0's server) names the store already.
  if (absl::StartsWith(status.message(), "tcp://")) return status;
  return absl::Status(status.code(), absl::StrCat(url, ": ", status.message()));
}

// "rank 1 on node2:4711", for the reason a failing rank reports.
std::string Reporter(int rank) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(rank >= 0 ? absl::StrCat("rank ", rank) : "a joining process", " on ", host,
                      ":", getpid());
}

}  // namespace

absl::StatusOr<store::TcpStoreServerLimits> StoreLimits(const dist_rendezvous_hints_t* hints) {
  store::TcpStoreServerLimits limits;
  for (size_t i = 0; hints != nullptr && i < hints->num_options; ++i) {
    const dist_kv_t& option = hints->options[i];
    if (option.key == nullptr || option.value == nullptr) continue;
    absl::string_view name = option.key;
    if (!absl::ConsumePrefix(&name, "store.")) continue;
    if (absl::Status set = store::SetLimit(&limits, name, option.value); !set.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("option ", option.key, ": ", set.message()));
    }
  }
  if (absl::Status checked = store::CheckLimits(limits); !checked.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(checked.message(), " (from the options store.<name>)"));
  }
  return limits;
}

absl::StatusOr<dist_store_t*> OpenTcpStore(const TcpRendezvousConfig& config) {
  store::TcpStoreClientOptions client_options;
  client_options.host = config.host;
  client_options.port = config.port;
  client_options.token = config.token;
  client_options.timeout = config.timeout;
  client_options.reporter = Reporter(config.rank);

  std::shared_ptr<store::TcpStoreServer> server;
  if (config.rank == 0 && !config.external) {
    store::TcpStoreServerOptions server_options;
    server_options.bind_host = BindHost(config);
    server_options.port = config.port;
    server_options.token = config.token;
    server_options.limits = config.limits;
    // This server serves this job only: once a rank's rendezvous failed, it
    // tells late ranks why instead of letting them join one that is over.
    server_options.keep_failures = true;
    server_options.advertised_host = config.host;
    server_options.log = [](const std::string& line) { dist::Log(DIST_LOG_WARN, line); };
    absl::StatusOr<std::unique_ptr<store::TcpStoreServer>> started =
        store::TcpStoreServer::Start(std::move(server_options));
    if (!started.ok()) {
      return WithUrl(
          config.url,
          absl::Status(
              started.status().code(),
              absl::StrCat("rank 0 could not host the store: ", started.status().message(),
                           " (set the port in the URL or MASTER_PORT; or run dist_store_server "
                           "and add ?external=1)")));
    }
    server = std::move(*started);
    dist::Log(DIST_LOG_INFO, absl::StrCat("rank 0 hosts the store on ", server->address()));
    // Rank 0 talks to its own server over loopback unless it bound a
    // specific address.
    const std::string bound = BindHost(config);
    client_options.host =
        IsWildcard(bound) ? (server->address()[0] == '[' ? "::1" : "127.0.0.1") : bound;
    client_options.port = server->port();
    if (config.announce) {
      absl::Status announced = config.announce(config.host, server->port());
      if (!announced.ok()) return WithUrl(config.url, announced);
    }
  }
  absl::StatusOr<std::unique_ptr<store::TcpStoreClient>> client =
      store::TcpStoreClient::Connect(client_options);
  if (!client.ok()) return WithUrl(config.url, client.status());
  // A first request makes this rank one of the clients rank 0's server
  // waits for at its exit (one that only logged in is not waited for, so
  // idle strangers cannot hold rank 0 there).
  if (absl::StatusOr<int64_t> keys = (*client)->NumKeys(); !keys.ok()) {
    return WithUrl(config.url, keys.status());
  }

  std::function<void(bool)> after_release;
  if (server != nullptr) {
    const absl::Duration timeout = config.timeout;
    after_release = [server, timeout](bool failed) {
      // The other ranks may still be reading their last keys: keep serving
      // until they have disconnected, but never longer than the timeout.
      // After a failure (the core released the store with release_failed) a
      // stopped or hung rank may never disconnect: then only briefly, so
      // that dist_destroy returns within about a second.
      const absl::Duration linger = failed ? std::min(timeout, absl::Seconds(1)) : timeout;
      if (!server->WaitForClientsToLeave(linger)) {
        dist::Log(DIST_LOG_WARN,
                  absl::StrCat(server->clients(), " rank(s) still connected to the store on ",
                               server->address(), " after ", absl::FormatDuration(linger),
                               "; stopping it anyway"));
      }
      server->Stop();
    };
  }
  return store::MakeAbiStore(*std::move(client), config.timeout, std::move(after_release));
}

absl::Status ResolveOverTcpStore(const Url& url, const Query& query,
                                 const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                                 const char* component, const std::string& host, int port,
                                 dist_rendezvous_result_t* result) {
  absl::StatusOr<RankInfo> ranks = ResolveRanks(url, query, hints);
  if (!ranks.ok()) return ranks.status();
  absl::StatusOr<bool> external = query.GetBool("external", false);
  if (!external.ok()) return external.status();

  TcpRendezvousConfig config;
  config.url = url.text;
  config.component = component;
  config.host = host;
  config.port = port;
  config.rank = ranks->rank;
  config.external = *external;
  config.bind = query.Get("bind");
  config.token = StoreToken(hints);
  config.timeout = absl::Milliseconds(timeout_ms);
  absl::StatusOr<store::TcpStoreServerLimits> limits = StoreLimits(hints);
  if (!limits.ok()) return WithUrl(url.text, limits.status());
  config.limits = *limits;
  absl::StatusOr<dist_store_t*> store = OpenTcpStore(config);
  if (!store.ok()) return store.status();
  FillResult(*ranks, *store, result);
  return absl::OkStatus();
}

}  // namespace dist::rendezvous

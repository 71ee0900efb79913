// tcp://host:port?rank=R&world_size=N — rank 0 hosts the TCP store (unless
// ?external=1, then dist_store_server does), every rank connects to it.
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/cpp/rendezvous_adapter.hpp"
#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/plugin_support.h"
#include "plugins/rendezvous/common/ranks.h"
#include "plugins/rendezvous/common/tcp_rendezvous.h"
#include "support/url.h"

namespace dist::rendezvous {

using support::ParseUrl;
namespace {

const char* const kSchemes[] = {"tcp", nullptr};

absl::Status Bad(const Url& url, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed init method URL '", url.text, "': ", why,
                   "; expected tcp://HOST:PORT?rank=R&world_size=N (IPv6: tcp://[::1]:29500)"));
}

absl::Status ResolveTcp(const char* text, const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                        dist_rendezvous_result_t* result) {
  absl::StatusOr<Url> url = ParseUrl(text);
  if (!url.ok()) return url.status();
  if (url->scheme != "tcp") return Bad(*url, "the tcp plugin handles only tcp://");
  if (url->host.empty()) return Bad(*url, "no host");
  if (url->port < 0) return Bad(*url, "no port");
  if (!url->path.empty() && url->path != "/") return Bad(*url, "a tcp:// URL has no path");
  absl::StatusOr<Query> query = Query::From(
      *url, {"rank", "world_size", "local_rank", "local_world_size", "external", "bind"});
  if (!query.ok()) return query.status();
  return ResolveOverTcpStore(*url, *query, hints, timeout_ms, "tcp", url->host, url->port, result);
}

}  // namespace
}  // namespace dist::rendezvous

DIST_EXPORT_RENDEZVOUS_PLUGIN("tcp", dist::rendezvous::kSchemes, dist::rendezvous::ResolveTcp)

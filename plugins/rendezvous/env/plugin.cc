// env:// — the torch.distributed convention: MASTER_ADDR and MASTER_PORT
// name rank 0's store, RANK and WORLD_SIZE (or a launcher's variables) say
// who this process is. The URL query overrides the environment; the
// caller's hints override both. The store is the same TCP store as tcp://.
#include <string>

#include "absl/strings/str_cat.h"
#include "dist/cpp/rendezvous_adapter.hpp"
#include "dist/cpp/status.hpp"
#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/tcp_rendezvous.h"
#include "plugins/rendezvous/env/master_address.h"
#include "support/url.h"

namespace dist::rendezvous {

using support::ParseUrl;
namespace {

const char* const kSchemes[] = {"env", nullptr};

absl::Status Bad(const Url& url, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "malformed init method URL '", url.text, "': ", why,
      "; expected env:// (optionally env://?rank=R&world_size=N&master_addr=H&master_port=P)"));
}

absl::Status ResolveEnv(const char* text, const dist_rendezvous_hints_t* hints, int64_t timeout_ms,
                        dist_rendezvous_result_t* result) {
  absl::StatusOr<Url> url = ParseUrl(text);
  if (!url.ok()) return url.status();
  if (url->scheme != "env") return Bad(*url, "the env plugin handles only env://");
  if (!url->host.empty() || url->port >= 0 || (!url->path.empty() && url->path != "/")) {
    return Bad(*url,
               "env:// takes no host, port or path (they come from MASTER_ADDR and "
               "MASTER_PORT)");
  }
  absl::StatusOr<Query> query =
      Query::From(*url, {"rank", "world_size", "local_rank", "local_world_size", "master_addr",
                         "master_port", "external", "bind"});
  if (!query.ok()) return query.status();
  std::string host;
  int port = 0;
  DIST_RETURN_IF_ERROR(MasterAddress(*url, *query, &host, &port));
  return ResolveOverTcpStore(*url, *query, hints, timeout_ms, "env", host, port, result);
}

}  // namespace
}  // namespace dist::rendezvous

DIST_EXPORT_RENDEZVOUS_PLUGIN("env", dist::rendezvous::kSchemes, dist::rendezvous::ResolveEnv)

// env:// — the torch.distributed convention: MASTER_ADDR and MASTER_PORT
// name rank 0's store, RANK and WORLD_SIZE (or a launcher's variables) say
// who this process is. The URL query overrides the environment; the
// caller's hints override both. The store is the same TCP store as tcp://.
#include <stdlib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/cpp/rendezvous_adapter.hpp"
#include "dist/cpp/status.hpp"
#include "dist/rendezvous_plugin.h"
#include "plugins/rendezvous/common/plugin_support.h"
#include "plugins/rendezvous/common/ranks.h"
#include "plugins/rendezvous/common/slurm.h"
#include "plugins/rendezvous/common/tcp_rendezvous.h"
#include "plugins/rendezvous/common/url.h"

namespace dist::rendezvous {
namespace {

const char* const kSchemes[] = {"env", nullptr};

absl::Status Bad(const Url& url, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "malformed init method URL '", url.text, "': ", why,
      "; expected env:// (optionally env://?rank=R&world_size=N&master_addr=H&master_port=P)"));
}

// MASTER_ADDR / MASTER_PORT, from the URL query or else the environment.
absl::Status MasterAddress(const Url& url, const Query& query, std::string* host, int* port) {
  std::optional<std::string> addr = query.Get("master_addr");
  std::string addr_source = "URL parameter master_addr";
  if (!addr) {
    if (const char* env = getenv("MASTER_ADDR")) addr = env;
    addr_source = "MASTER_ADDR";
  }
  if (!addr && (addr = SlurmMasterAddr())) addr_source = "the first host of SLURM_JOB_NODELIST";
  if (!addr || addr->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": MASTER_ADDR is ", addr ? "empty" : "not set",
                     "; set it to the host name or address of rank 0 (or use tcp://HOST:PORT)"));
  }
  if (addr->size() > 2 && addr->front() == '[' && addr->back() == ']') {
    *addr = addr->substr(1, addr->size() - 2);  // bracketed IPv6 literal
  }
  if (addr->find_first_of(" /?#") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": ", addr_source, "='", *addr,
                     "' is not a host name or address; set it to rank 0's host"));
  }
  std::optional<std::string> port_text = query.Get("master_port");
  std::string port_source = "URL parameter master_port";
  if (!port_text) {
    if (const char* env = getenv("MASTER_PORT")) port_text = env;
    port_source = "MASTER_PORT";
  }
  if (!port_text) {
    if (std::optional<int> slurm_port = SlurmMasterPort()) {
      port_text = std::to_string(*slurm_port);
      port_source = "10000 + SLURM_JOB_ID % 20000";
    }
  }
  if (!port_text) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text,
                     ": MASTER_PORT is not set; set it to a free TCP port on rank 0's host "
                     "(e.g. 29500)"));
  }
  if (!absl::SimpleAtoi(*port_text, port) || *port < 1 || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": ", port_source, "='", *port_text,
                     "' is malformed; it must be a TCP port number in 1..65535"));
  }
  *host = *addr;
  return absl::OkStatus();
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

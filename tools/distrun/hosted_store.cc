#include "tools/distrun/hosted_store.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tools/distrun/line_prefixer.h"

namespace dist::distrun {
namespace {

// On one node the clients left at the end are ranks' leftovers (a child
// that inherited a connection): a short wait, like the output drain's.
constexpr absl::Duration kLingerOneNode = absl::Seconds(2);
// The other nodes' ranks may still be finishing: as long as rank 0's own
// store would wait for them (dist's default timeout).
constexpr absl::Duration kLingerForOtherNodes = absl::Minutes(5);
// After a failure the other nodes' ranks are being stopped too.
constexpr absl::Duration kLingerAfterFailure = absl::Seconds(1);

void Log(const std::string& message) {
  WriteAll(STDERR_FILENO, absl::StrCat("distrun: ", message, "\n"));
}

// An IP literal (or localhost) is bound as it is: the store is then reached
// only where MASTER_ADDR points. A host name may resolve to an address
// that is not this host's, so it gets every interface (the token guards it).
std::string BindHost(std::string addr) {
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') {
    addr = addr.substr(1, addr.size() - 2);
  }
  unsigned char buffer[sizeof(in6_addr)];
  if (addr == "localhost" || inet_pton(AF_INET, addr.c_str(), buffer) == 1 ||
      inet_pton(AF_INET6, addr.c_str(), buffer) == 1) {
    return addr;
  }
  return "";
}

}  // namespace

StorePlan PlanStore(const Job& job) {
  StorePlan plan;
  if (!job.host_store || job.init_method != "env://") return plan;
  if (job.nnodes > 1 && job.store_port == 0) return plan;
  plan.external = true;
  plan.host_here = job.node_rank == 0;
  return plan;
}

std::optional<std::string> StorePlanWarning(const Job& job) {
  if (!job.survive || PlanStore(job).external || !job.host_store || job.init_method != "env://") {
    return std::nullopt;
  }
  return absl::StrCat("--survive with --nnodes=", job.nnodes,
                      " but no --store_port: rank 0 hosts the store, so losing rank 0 ends the "
                      "job; give --store_port=PORT (the same on every node) and distrun on node 0 "
                      "hosts the store");
}

std::string HostedStoreInitMethod(int port) {
  return absl::StrCat("env://?external=1&master_port=", port);
}

absl::Duration StoreLinger(const Job& job, int exit_code) {
  if (job.nnodes == 1) return kLingerOneNode;
  // Under --survive this node's ranks may all be lost while the other
  // nodes' go on: they still need the store.
  return exit_code == 0 || job.survive ? kLingerForOtherNodes : kLingerAfterFailure;
}

HostedStore::HostedStore(std::unique_ptr<store::TcpStoreServer> server)
    : server_(std::move(server)) {}

HostedStore::~HostedStore() { server_->Stop(); }

absl::StatusOr<std::unique_ptr<HostedStore>> HostedStore::Start(const Job& job,
                                                                const std::string& token) {
  store::TcpStoreServerOptions options;
  options.bind_host = BindHost(job.master_addr);
  options.port = job.store_port;
  options.token = token;
  options.advertised_host = job.master_addr;
  // Without --survive any failure ends the job: a rank's report that its
  // rendezvous failed is then told to every late rank at once. Under
  // --survive the survivors must go on using the store after such a report,
  // and every survivor makes one as it exits (its old group was revoked):
  // expected, so not logged either.
  options.keep_failures = !job.survive;
  options.log_failure_reports = false;
  options.log = [](const std::string& line) { Log(absl::StrCat("store: ", line)); };
  absl::StatusOr<std::unique_ptr<store::TcpStoreServer>> server =
      store::TcpStoreServer::Start(std::move(options));
  if (!server.ok()) {
    return absl::Status(
        server.status().code(),
        absl::StrCat("cannot host the job's store on ", job.master_addr, ":", job.store_port, ": ",
                     server.status().message(),
                     "; check --master_addr (an address of this host) and --store_port, or pass "
                     "--host_store=false to let rank 0 host the store"));
  }
  return std::unique_ptr<HostedStore>(new HostedStore(*std::move(server)));
}

void HostedStore::Stop(absl::Duration linger) {
  // The ranks' connections close as they exit; the server's loop sees that
  // a moment later.
  const absl::Duration first = std::min(linger, kLingerOneNode);
  if (!server_->WaitForClientsToLeave(first) && linger > first) {
    Log(absl::StrCat("this node's ranks have ended; the store stays up for the ",
                     server_->clients(), " rank(s) of other nodes still connected (at most ",
                     absl::FormatDuration(linger - first), ")"));
    server_->WaitForClientsToLeave(linger - first);
  }
  if (const int left = server_->clients(); left > 0) {
    Log(absl::StrCat("stopping the store with ", left, " client(s) still connected after ",
                     absl::FormatDuration(linger)));
  }
  server_->Stop();
}

}  // namespace dist::distrun

#include "tools/distrun/job.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

extern char** environ;

namespace dist::distrun {

absl::Status ValidateJob(const Job& job) {
  if (job.argv.empty()) {
    return absl::InvalidArgumentError(
        "no program given: usage is distrun -n N [flags] PROGRAM [ARGS...]");
  }
  if (job.nproc_per_node < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("-n/--nproc_per_node is ", job.nproc_per_node,
                     "; give the number of ranks to start on this node (>= 1)"));
  }
  if (job.nnodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes is ", job.nnodes, "; it must be >= 1"));
  }
  if (job.node_rank < 0 || job.node_rank >= job.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node_rank is ", job.node_rank, " but --nnodes is ", job.nnodes,
                     "; give a node rank in [0, ", job.nnodes - 1, "]"));
  }
  if (job.max_restarts < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_restarts is ", job.max_restarts, "; give how many ranks may be restarted (>= 0)"));
  }
  if (job.master_port < 0 || job.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master_port is ", job.master_port, "; give a TCP port in 1..65535"));
  }
  if (job.nnodes > 1 && job.master_port == 0) {
    return absl::InvalidArgumentError(
        "--nnodes > 1 needs --master_port (the same on every node) and "
        "--master_addr (the address of node 0)");
  }
  if (job.store_port < 0 || job.store_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--store_port is ", job.store_port, "; give a TCP port in 1..65535"));
  }
  if (job.store_port != 0 && (!job.host_store || job.init_method != "env://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--store_port is the port of the store distrun hosts, but ",
                     job.host_store ? absl::StrCat("--init_method=", job.init_method)
                                    : std::string("--host_store=false"),
                     " leaves the store to the ranks; drop --store_port"));
  }
  if (job.master_addr.empty()) {
    return absl::InvalidArgumentError(
        "--master_addr is empty; give the host name or address of node 0");
  }
  if (job.grace < absl::ZeroDuration() || job.timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--grace and --timeout must not be negative (e.g. --grace=5s)");
  }
  return absl::OkStatus();
}

std::optional<std::string> MasterAddrWarning(const Job& job) {
  const absl::string_view addr = job.master_addr;
  if (job.nnodes < 2 || !(absl::StartsWith(addr, "127.") || addr == "::1" || addr == "[::1]" ||
                          addr == "localhost")) {
    return std::nullopt;
  }
  return absl::StrCat("--nnodes is ", job.nnodes, " but --master_addr is ", job.master_addr,
                      ", a loopback address: that works only when every node runs on this "
                      "machine; on several machines give node 0's host name or address, the "
                      "same on every node");
}

std::vector<std::string> RankEnvironment(const Job& job, int local_rank,
                                         const std::vector<std::string>& base, int restart) {
  std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", absl::StrCat(job.global_rank(local_rank))},
      {"WORLD_SIZE", absl::StrCat(job.world_size())},
      {"LOCAL_RANK", absl::StrCat(local_rank)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(job.nproc_per_node)},
      {"MASTER_ADDR", job.master_addr},
      {"MASTER_PORT", absl::StrCat(job.master_port)},
      {"DIST_INIT_METHOD", job.init_method},
  };
  if (!job.backend.empty()) ours.emplace_back("DIST_BACKEND", job.backend);
  if (job.survive) ours.emplace_back("DIST_SURVIVAL", "1");
  if (job.max_restarts > 0) ours.emplace_back("DIST_MAX_RESTARTS", absl::StrCat(job.max_restarts));
  if (restart > 0) {
    ours.emplace_back("DIST_JOIN", "1");
    ours.emplace_back("DIST_RESTART_COUNT", absl::StrCat(restart));
  }
  if (!job.store_token.empty()) ours.emplace_back("DIST_STORE_TOKEN", job.store_token);

  absl::flat_hash_map<std::string, bool> replaced;
  for (const auto& [key, value] : ours) replaced[key] = true;
  std::vector<std::string> env;
  for (const std::string& entry : base) {
    absl::string_view key(entry);
    key = key.substr(0, key.find('='));
    if (!replaced.contains(key)) env.push_back(entry);
  }
  for (const auto& [key, value] : ours) env.push_back(absl::StrCat(key, "=", value));
  return env;
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace dist::distrun

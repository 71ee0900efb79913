#include "tools/distbench/launcher.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "support/free_port.h"
#include "support/local_launcher.h"

namespace distbench {
namespace {

std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("exited with code ", WEXITSTATUS(status));
}

}  // namespace

int LaunchLocalRanks(const LaunchOptions& options) {
  const absl::StatusOr<int> free_port = dist::PickFreePort();
  if (!free_port.ok()) {
    std::fprintf(stderr, "distbench: no free loopback port for MASTER_PORT: %s\n",
                 std::string(free_port.status().message()).c_str());
    return 1;
  }
  std::vector<dist::LocalProcess> ranks;
  for (int rank = 0; rank < options.ranks; ++rank) {
    dist::LocalProcess& p = ranks.emplace_back();
    p.name = absl::StrCat("rank ", rank);
    p.program = "/proc/self/exe";  // this same distbench
    p.argv.push_back("distbench");
    p.argv.insert(p.argv.end(), options.args.begin(), options.args.end());
    p.env = {{"RANK", absl::StrCat(rank)},       {"WORLD_SIZE", absl::StrCat(options.ranks)},
             {"LOCAL_RANK", absl::StrCat(rank)}, {"LOCAL_WORLD_SIZE", absl::StrCat(options.ranks)},
             {"MASTER_ADDR", "127.0.0.1"},       {"MASTER_PORT", absl::StrCat(*free_port)}};
  }
  dist::LocalLaunchOptions launch;
  launch.tool = "distbench";
  launch.stop_on_failure = true;  // the others would wait for it until their timeout
  launch.forward_signals = true;
  launch.grace = options.grace;
  const absl::StatusOr<dist::LocalLaunchResult> result = dist::RunLocalProcesses(ranks, launch);
  if (!result.ok()) {
    std::fprintf(stderr, "distbench: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  const int first = result->first_failure;
  const int code = first >= 0            ? dist::ExitCodeOf(result->exits[first].status)
                   : result->signal != 0 ? 128 + result->signal
                                         : 0;
  if (code == 0) return 0;
  for (int rank = 0; rank < options.ranks; ++rank) {
    const int status = result->exits[rank].status;
    if (dist::ExitCodeOf(status) == 0) continue;
    std::fprintf(stderr, "distbench: rank %d %s%s\n", rank, Describe(status).c_str(),
                 rank == first ? " (first failure)" : "");
  }
  return code;
}

}  // namespace distbench

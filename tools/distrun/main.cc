// distrun: starts the ranks of a dist job on one node, like torchrun.
//
//   distrun -n 4 [--backend gloo] PROGRAM [ARGS...]
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/dist.h"
#include "support/auth.h"
#include "support/free_port.h"
#include "tools/common/help.h"
#include "tools/distrun/command_line.h"
#include "tools/distrun/hosted_store.h"
#include "tools/distrun/job.h"
#include "tools/distrun/launcher.h"

ABSL_FLAG(int, nproc_per_node, 1,
          "Ranks to start on this node (short: -n; also --nproc-per-node).");
ABSL_FLAG(std::string, backend, "",
          "Sets DIST_BACKEND for the ranks (gloo, mpi, nccl, shm, a device "
          "map like cpu:gloo,cuda:nccl); empty leaves it as it is.");
ABSL_FLAG(int, nnodes, 1, "Number of nodes in the job.");
ABSL_FLAG(int, node_rank, 0,
          "This node's index in [0, nnodes); global RANK = node_rank * "
          "nproc_per_node + LOCAL_RANK.");
ABSL_FLAG(std::string, master_addr, "127.0.0.1",
          "MASTER_ADDR: the address of node 0, where rank 0 listens.");
ABSL_FLAG(int, master_port, 0, "MASTER_PORT; 0 picks a free port (one node only).");
ABSL_FLAG(std::string, init_method, "env://",
          "DIST_INIT_METHOD for the ranks, e.g. tcp://node0:29500 or "
          "file:///shared/dir/job1 (a directory every node sees); RANK and "
          "WORLD_SIZE still come from distrun.");
ABSL_FLAG(bool, host_store, true,
          "distrun hosts the job's store, so it outlives every rank (rank 0 too, for "
          "--survive): the ranks get DIST_INIT_METHOD=env://?external=1&master_port=PORT. "
          "Only with the default --init_method; on several nodes only with --store_port. "
          "false: rank 0 hosts it at MASTER_PORT.");
ABSL_FLAG(int, store_port, 0,
          "Port of the store distrun hosts; 0 picks a free one (one node). Several nodes: "
          "the same on every node, and distrun on node 0 hosts the store there.");
ABSL_FLAG(absl::Duration, grace, absl::Seconds(3),
          "After the first rank fails, the others get this long to end by "
          "themselves, then SIGTERM, then after as long again SIGKILL. Also "
          "the time between a forwarded SIGINT/SIGTERM and SIGKILL.");
ABSL_FLAG(absl::Duration, timeout, absl::ZeroDuration(),
          "Limit for the whole job (e.g. 10m); when it passes every rank is "
          "stopped and distrun exits with 124. 0: no limit.");
ABSL_FLAG(bool, survive, false,
          "A rank killed by a signal does not stop the others: they go on without it "
          "(every rank gets DIST_SURVIVAL=1, and survivors call dist_shrink; see "
          "docs/survival.md). A rank that exits with an error still stops the job. distrun "
          "exits 0 when every rank that was not lost ended with 0, and names the lost ranks.");
ABSL_FLAG(int, max_restarts, 0,
          "Implies --survive. A rank killed by a signal is started again, up to this many "
          "times in all, as a process that joins the running job (it gets DIST_JOIN=1 and "
          "DIST_RESTART_COUNT; every rank gets DIST_MAX_RESTARTS): the survivors shrink, then "
          "admit it with dist_grow (docs/survival.md).");
ABSL_FLAG(bool, prefix, true, "Prefix every output line with \"[RANK] \".");

namespace {

std::vector<std::string> Args(int argc, char** argv) {
  return std::vector<std::string>(argv, argv + argc);
}

// Only distrun's own flags count (PROGRAM's --help is PROGRAM's), and
// SplitArgs has written them as "--name" ("-h" as "--h"), so distrun looks
// for help itself instead of dist::tools::WantsHelp.
bool WantsHelp(const std::vector<std::string>& own) {
  for (size_t i = 1; i < own.size(); ++i) {
    if (own[i] == "--help" || own[i] == "--h") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "starts the ranks of a dist job on this node.\n\n"
      "  distrun -n N [--backend NAME] [flags] PROGRAM [ARGS...]\n\n"
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
      "MASTER_ADDR, MASTER_PORT and DIST_INIT_METHOD=env://?external=1&master_port=PORT\n"
      "(the store distrun hosts; see --host_store and --init_method; and DIST_BACKEND\n"
      "with --backend), and DIST_STORE_TOKEN: a random secret for this job,\n"
      "unless DIST_STORE_TOKEN is set already (several nodes: export the same\n"
      "one on every node). Output lines are prefixed with \"[RANK] \". SIGINT and\n"
      "SIGTERM are forwarded. When a rank fails the others are stopped and\n"
      "distrun exits with the first failure's code (128+N for signal N).\n"
      "Several nodes: run distrun on each with --nnodes, --node_rank,\n"
      "--master_addr and --master_port (and --store_port, for a store that\n"
      "outlives rank 0). Flags go before PROGRAM (or end them with --);\n"
      "dashes in flag names work too (--node-rank).");
  dist::tools::SetToolUsage(
      "distrun", absl::StrCat("distrun (dist ", DIST_VERSION_MAJOR, ".", DIST_VERSION_MINOR, ".",
                              DIST_VERSION_PATCH, ")\n"));

  dist::distrun::SplitCommandLine split =
      dist::distrun::SplitArgs(Args(argc, argv), [](absl::string_view name) {
        absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
        return flag != nullptr && !flag->IsOfType<bool>();
      });
  if (WantsHelp(split.own)) dist::tools::PrintHelpAndExit(argv[0]);
  std::vector<char*> own;
  for (std::string& arg : split.own) own.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(own.size()), own.data());

  dist::distrun::Job job;
  job.argv = split.program;
  job.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  job.nnodes = absl::GetFlag(FLAGS_nnodes);
  job.node_rank = absl::GetFlag(FLAGS_node_rank);
  job.master_addr = absl::GetFlag(FLAGS_master_addr);
  job.master_port = absl::GetFlag(FLAGS_master_port);
  job.backend = absl::GetFlag(FLAGS_backend);
  job.init_method = absl::GetFlag(FLAGS_init_method);
  job.grace = absl::GetFlag(FLAGS_grace);
  job.timeout = absl::GetFlag(FLAGS_timeout);
  job.prefix = absl::GetFlag(FLAGS_prefix);
  job.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  job.survive = absl::GetFlag(FLAGS_survive) || job.max_restarts > 0;
  job.host_store = absl::GetFlag(FLAGS_host_store);
  job.store_port = absl::GetFlag(FLAGS_store_port);
  if (absl::Status valid = dist::distrun::ValidateJob(job); !valid.ok()) {
    std::fprintf(stderr, "distrun: %s\n", std::string(valid.message()).c_str());
    return 2;
  }
  if (std::optional<std::string> warning = dist::distrun::MasterAddrWarning(job)) {
    std::fprintf(stderr, "distrun: warning: %s\n", warning->c_str());
  }
  if (std::optional<std::string> warning = dist::distrun::StorePlanWarning(job)) {
    std::fprintf(stderr, "distrun: warning: %s\n", warning->c_str());
  }
  // The store authenticates its clients by default: a random secret for
  // this job, unless the user gave one. Nodes cannot agree on a random one,
  // so several nodes need it exported.
  const char* given = getenv("DIST_STORE_TOKEN");
  if (given == nullptr || *given == '\0') {
    if (job.nnodes == 1) {
      job.store_token = dist::support::auth::RandomToken();
      if (job.store_token.empty()) {
        std::fprintf(stderr,
                     "distrun: could not draw a random store token; set "
                     "DIST_STORE_TOKEN yourself\n");
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "distrun: warning: DIST_STORE_TOKEN is not set, so the job's store accepts "
                   "anyone who can reach it; export the same secret on every node, e.g. "
                   "export DIST_STORE_TOKEN=$(openssl rand -hex 32)\n");
    }
  }
  // The store starts before MASTER_PORT is picked, so that the two cannot
  // be the same port.
  const dist::distrun::StorePlan plan = dist::distrun::PlanStore(job);
  std::unique_ptr<dist::distrun::HostedStore> store;
  if (plan.host_here) {
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0) job.rank_open_files = files.rlim_cur;
    absl::StatusOr<std::unique_ptr<dist::distrun::HostedStore>> started =
        dist::distrun::HostedStore::Start(
            job, !job.store_token.empty() ? job.store_token : (given != nullptr ? given : ""));
    if (!started.ok()) {
      std::fprintf(stderr, "distrun: %s\n", std::string(started.status().message()).c_str());
      return 1;
    }
    store = *std::move(started);
    job.store_port = store->port();
  }
  if (plan.external) job.init_method = dist::distrun::HostedStoreInitMethod(job.store_port);
  if (job.master_port == 0) {
    absl::StatusOr<int> port = dist::PickFreePort(job.master_addr);
    if (!port.ok()) {
      std::fprintf(stderr, "distrun: %s; check --master_addr or pass --master_port\n",
                   std::string(port.status().message()).c_str());
      return 2;
    }
    job.master_port = *port;
  }
  // A reader of our output that goes away must not kill us before the
  // ranks are stopped; the ranks get default signal handling back (libuv
  // resets dispositions in the child).
  signal(SIGPIPE, SIG_IGN);
  dist::distrun::Launcher launcher(job);
  const int code = launcher.Run();
  // Every rank of this node has exited by now.
  if (store != nullptr) store->Stop(dist::distrun::StoreLinger(job, code));
  return code;
}

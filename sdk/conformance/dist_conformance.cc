// dist_conformance: runs the conformance kit on a backend plugin.
//
//   dist_conformance --plugin=./libdist-backend-mine.so -n 4
//   dist_conformance --plugin=mpi -n 4 --launcher=mpirun --quick
//
// Starts N processes of itself (locally with a loopback tcp:// or file://
// rendezvous, or under mpirun), each driving the plugin through every ABI
// entry point it declares, and prints a pass/fail table and a final line
// "N passed, N failed". Exit code 0 only when nothing failed.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sdk/conformance/failure.h"
#include "sdk/conformance/launcher.h"
#include "sdk/conformance/worker.h"

ABSL_FLAG(std::string, plugin, "",
          "the backend plugin: a path to its .so, or a name found in the plugin search path");
ABSL_FLAG(int, n, 2, "number of ranks (processes) to start");
ABSL_FLAG(bool, quick, false,
          "quick sizes: the large size is --quick_large_bytes and rooted collectives use roots "
          "0 and N-1 only");
ABSL_FLAG(std::string, launcher, "local",
          "how ranks start: 'local' (fork, loopback rendezvous), or for backends that need an MPI "
          "launcher 'mpirun' (Open MPI) or 'mpiexec.mpich' (MPICH's Hydra)");
ABSL_FLAG(std::string, via, "abi",
          "'abi' drives the plugin's table directly; 'core' goes through dist_init and the host "
          "API");
ABSL_FLAG(std::string, init, "tcp", "rendezvous of the local launcher: 'tcp' or 'file'");
ABSL_FLAG(std::string, mpirun, "mpirun", "the mpirun to use with --launcher=mpirun");
ABSL_FLAG(int, timeout_s, 600, "the whole run is killed after this many seconds (a failure)");
ABSL_FLAG(int64_t, op_timeout_ms, 30000, "timeout of every operation and wait");
ABSL_FLAG(uint64_t, large_bytes, 16u << 20, "total bytes of the 'large' size");
ABSL_FLAG(uint64_t, quick_large_bytes, 64u << 10, "total bytes of the 'large' size with --quick");
ABSL_FLAG(bool, only_failures, false, "print only the failing rows of the table");
ABSL_FLAG(bool, allow_all_skipped, false,
          "pass when every check was skipped because the backend cannot run here (a GPU "
          "backend without a GPU); without it such a run fails, having tested nothing");
ABSL_FLAG(std::vector<std::string>, skip_sections, {},
          "comma-separated sections not to run (reported as skipped): declared, matrix, p2p, "
          "barrier, async, work, subgroups, errors, abort, mismatched, peer_death");
// Internal: how the launcher starts each rank.
ABSL_FLAG(std::string, only, "",
          "run only this: 'failure' (a rank dies in each round; the survivors shrink and grow "
          "back; needs --via=core and the local launcher, and a backend with DIST_CAP_SHRINK)");
ABSL_FLAG(bool, worker, false, "internal: run as one rank");
ABSL_FLAG(int, join_round, -1, "internal: --only=failure, a process joining in this round");
ABSL_FLAG(std::string, url, "", "internal: the init method URL of the ranks");
ABSL_FLAG(int, rank, -1, "internal: this rank (-1: from the launcher's environment)");
ABSL_FLAG(int, world_size, -1, "internal: the world size (-1: from the launcher's environment)");
ABSL_FLAG(std::string, results_file, "", "internal: where this rank writes its rows");
ABSL_FLAG(std::string, results_dir, "", "internal: where each rank writes rank<R>.tsv");

namespace {

std::string SelfPath() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "dist_conformance";
  buffer[n] = '\0';
  return buffer;
}

// A plugin given as a path is made absolute, so every rank finds it.
std::string Absolute(const std::string& plugin) {
  if (plugin.find('/') == std::string::npos) return plugin;
  char buffer[PATH_MAX];
  return realpath(plugin.c_str(), buffer) != nullptr ? std::string(buffer) : plugin;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "runs the dist conformance kit on a backend plugin.\n"
      "  dist_conformance --plugin=PATH.so [-n N] [--quick]\n"
      "                   [--launcher=local|mpirun|mpiexec.mpich]\n"
      "Prints a pass/fail table and 'N passed, N failed'; exits non-zero on any failure.");
  absl::ParseCommandLine(argc, argv);
  const std::string plugin = Absolute(absl::GetFlag(FLAGS_plugin));
  if (plugin.empty()) {
    std::fprintf(stderr,
                 "dist_conformance: --plugin is required (a path to a backend .so or a "
                 "backend name); see --help\n");
    return 2;
  }
  const std::string via = absl::GetFlag(FLAGS_via);
  if (via != "abi" && via != "core") {
    std::fprintf(stderr, "dist_conformance: --via=%s: use 'abi' or 'core'\n", via.c_str());
    return 2;
  }
  dist::conformance::SuiteOptions suite;
  suite.quick = absl::GetFlag(FLAGS_quick);
  suite.large_bytes = absl::GetFlag(FLAGS_large_bytes);
  suite.quick_large_bytes = absl::GetFlag(FLAGS_quick_large_bytes);
  suite.op_timeout_ms = absl::GetFlag(FLAGS_op_timeout_ms);
  suite.skip_sections = absl::GetFlag(FLAGS_skip_sections);
  for (const std::string& section : suite.skip_sections) {
    const auto& known = dist::conformance::SectionNames();
    if (std::find(known.begin(), known.end(), section) == known.end()) {
      std::fprintf(stderr, "dist_conformance: --skip_sections: unknown section '%s'; use %s\n",
                   section.c_str(), absl::StrJoin(known, ", ").c_str());
      return 2;
    }
  }

  const std::string only = absl::GetFlag(FLAGS_only);
  if (!only.empty() && only != "failure") {
    std::fprintf(stderr, "dist_conformance: --only=%s: the one section run alone is 'failure'\n",
                 only.c_str());
    return 2;
  }
  const bool failure = only == "failure";
  if (failure && via != "core") {
    std::fprintf(stderr,
                 "dist_conformance: --only=failure needs --via=core (dist_shrink and dist_grow "
                 "are the host API's)\n");
    return 2;
  }
  // What every rank (and a joining process) is started with.
  std::vector<std::string> worker_args = {
      "--plugin=" + plugin,
      "--via=" + via,
      absl::StrCat("--quick=", suite.quick ? "true" : "false"),
      absl::StrCat("--large_bytes=", suite.large_bytes),
      absl::StrCat("--quick_large_bytes=", suite.quick_large_bytes),
      absl::StrCat("--op_timeout_ms=", suite.op_timeout_ms),
      "--skip_sections=" + absl::StrJoin(suite.skip_sections, ","),
      "--only=" + only,
  };

  if (absl::GetFlag(FLAGS_worker) && failure) {
    dist::conformance::FailureOptions run;
    run.plugin = plugin;
    run.url = absl::GetFlag(FLAGS_url);
    run.rank = absl::GetFlag(FLAGS_rank);
    run.world_size = absl::GetFlag(FLAGS_world_size);
    run.results_file = absl::GetFlag(FLAGS_results_file);
    run.join_round = absl::GetFlag(FLAGS_join_round);
    run.op_timeout_ms = suite.op_timeout_ms;
    run.self = SelfPath();
    run.worker_args = worker_args;
    return dist::conformance::RunFailureWorker(run);
  }
  if (absl::GetFlag(FLAGS_worker)) {
    dist::conformance::WorkerOptions worker;
    worker.plugin = plugin;
    worker.url = absl::GetFlag(FLAGS_url);
    worker.rank = absl::GetFlag(FLAGS_rank);
    worker.world_size = absl::GetFlag(FLAGS_world_size);
    worker.results_file = absl::GetFlag(FLAGS_results_file);
    worker.results_dir = absl::GetFlag(FLAGS_results_dir);
    worker.through_core = via == "core";
    worker.only_failures = absl::GetFlag(FLAGS_only_failures);
    worker.suite = suite;
    return dist::conformance::RunWorker(worker);
  }

  const int n = absl::GetFlag(FLAGS_n);
  const std::string launcher = absl::GetFlag(FLAGS_launcher);
  if (n < 1) {
    std::fprintf(stderr, "dist_conformance: -n %d: need at least 1 rank\n", n);
    return 2;
  }
  if (launcher != "local" && launcher != "mpirun" && launcher != "mpiexec.mpich") {
    std::fprintf(stderr,
                 "dist_conformance: --launcher=%s: use 'local', 'mpirun' or 'mpiexec.mpich'\n",
                 launcher.c_str());
    return 2;
  }
  dist::conformance::LaunchOptions options;
  options.self = SelfPath();
  options.world_size = n;
  options.launcher = launcher;
  options.mpirun = absl::GetFlag(FLAGS_mpirun);
  options.init = absl::GetFlag(FLAGS_init);
  options.timeout_s = absl::GetFlag(FLAGS_timeout_s);
  options.only_failures = absl::GetFlag(FLAGS_only_failures);
  options.allow_all_skipped = absl::GetFlag(FLAGS_allow_all_skipped);
  if (failure && launcher != "local") {
    std::fprintf(stderr, "dist_conformance: --only=failure runs under the local launcher only\n");
    return 2;
  }
  options.failure = failure;
  options.worker_args = worker_args;
  return dist::conformance::Launch(options);
}

// distinfo: what dist can do on this machine, and why not.
//
//   distinfo                      the core, every plugin, the configuration
//   distinfo --json               the same for scripts
//   distinfo --require gloo,mpi   exit 1 naming what is missing or unusable
//   distinfo --selftest           2 local ranks per usable backend
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "dist/dist.h"
#include "tools/common/help.h"
#include "tools/distinfo/json_output.h"
#include "tools/distinfo/report.h"
#include "tools/distinfo/require.h"
#include "tools/distinfo/selftest.h"
#include "tools/distinfo/selftest_worker.h"
#include "tools/distinfo/text_output.h"

ABSL_FLAG(bool, json, false, "Print everything as one JSON object.");
ABSL_FLAG(std::vector<std::string>, require, {},
          "Comma-separated backends (gloo,mpi) or rendezvous schemes (tcp://) "
          "that must be present and usable; exits 1 naming each that is "
          "missing or unusable, and why.");
ABSL_FLAG(bool, selftest, false,
          "Start 2 local ranks for each usable backend (through mpirun for "
          "MPI) and run a verified all-reduce, broadcast and barrier; exits 1 "
          "if any fails.");
ABSL_FLAG(std::vector<std::string>, selftest_backends, {},
          "Limit --selftest to these backends (comma-separated).");
ABSL_FLAG(absl::Duration, selftest_timeout, absl::Seconds(60),
          "Time limit of each backend's self-test; its ranks are killed when "
          "it passes.");
ABSL_FLAG(absl::Duration, load_timeout, absl::Seconds(60),
          "Time limit for loading and probing the plugins, which distinfo does in "
          "child processes: a plugin still loading after it (a wedged driver) is "
          "killed and listed as hung. When one hangs, distinfo takes up to twice "
          "this.");
ABSL_FLAG(std::string, config, "",
          "Resolve the configuration with this TOML file as dist_init's "
          "config_file (default: DIST_CONFIG).");

ABSL_DECLARE_FLAG(std::string, selftest_worker);
ABSL_DECLARE_FLAG(std::string, selftest_init);
ABSL_DECLARE_FLAG(int64_t, selftest_timeout_ms);

namespace {

using dist::distinfo::RequirementResult;

using dist::distinfo::SelftestResult;

std::string SelfExe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "distinfo";
  return std::string(path, n);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "shows what dist can do on this machine: the core and ABI versions, the\n"
      "plugin search path, every backend and rendezvous plugin with its\n"
      "capabilities and status (with the reason for each failure), and the\n"
      "effective configuration with the source of each value.\n\n"
      "  distinfo [--json] [--require gloo,mpi] [--selftest]\n\n"
      "A plugin that crashes or hangs while it is loaded or probed is listed as\n"
      "crashed or hung (with the signal and the file) instead of ending distinfo.\n\n"
      "Exit status: 0 ok, 1 a --require or --selftest failure, 2 bad usage.");
  // --help lists the public flags of main.cc, not selftest_worker_flags.cc's.
  dist::tools::SetToolUsage("distinfo/main",
                            absl::StrCat("distinfo (dist ", dist_version(), ")\n"));
  if (dist::tools::WantsHelp(argc, argv)) dist::tools::PrintHelpAndExit(argv[0]);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr, "distinfo: unexpected argument '%s'; see distinfo --help\n",
                 positional[1]);
    return 2;
  }

  if (std::string backend = absl::GetFlag(FLAGS_selftest_worker); !backend.empty()) {
    return dist::distinfo::RunSelftestWorker(backend, absl::GetFlag(FLAGS_selftest_init),
                                             absl::GetFlag(FLAGS_selftest_timeout_ms));
  }

  const std::string config_file = absl::GetFlag(FLAGS_config);
  dist_init_options_t options = dist_init_options_default();
  if (!config_file.empty()) options.config_file = config_file.c_str();
  const dist::distinfo::Report report =
      dist::distinfo::CollectReport(&options, absl::GetFlag(FLAGS_load_timeout));

  const bool json = absl::GetFlag(FLAGS_json);
  const std::vector<std::string> required = absl::GetFlag(FLAGS_require);
  const bool selftest = absl::GetFlag(FLAGS_selftest);
  int exit_code = 0;
  nlohmann::ordered_json out =
      json ? dist::distinfo::ReportToJson(report) : nlohmann::ordered_json();
  if (!json && required.empty() && !selftest) {
    std::fputs(dist::distinfo::FormatReport(report).c_str(), stdout);
  }

  if (!required.empty()) {
    std::vector<RequirementResult> results = dist::distinfo::CheckRequirements(report, required);
    std::vector<std::string> failed;
    for (const RequirementResult& r : results) {
      if (!r.ok) failed.push_back(r.name);
      if (!json) {
        std::fflush(stdout);  // keep the order when both go to one terminal
        std::fprintf(r.ok ? stdout : stderr, "distinfo: %s: %s\n", r.name.c_str(),
                     r.detail.c_str());
      }
    }
    if (!failed.empty()) {
      exit_code = 1;
      if (!json) {
        std::fflush(stdout);
        std::fprintf(stderr, "distinfo: --require failed: %s not usable here\n",
                     absl::StrJoin(failed, ", ").c_str());
      }
    }
    if (json) out["require"] = dist::distinfo::RequirementsToJson(results);
  }

  if (selftest) {
    dist::distinfo::SelftestOptions selftest_options;
    selftest_options.timeout = absl::GetFlag(FLAGS_selftest_timeout);
    selftest_options.self_exe = SelfExe();
    selftest_options.only = absl::GetFlag(FLAGS_selftest_backends);
    std::vector<SelftestResult> results = dist::distinfo::RunSelftests(report, selftest_options);
    for (const SelftestResult& r : results) {
      if (!r.skipped && !r.passed) exit_code = 1;
    }
    if (json) {
      out["selftest"] = dist::distinfo::SelftestsToJson(results);
    } else {
      if (!required.empty()) std::fputs("\n", stdout);
      std::fputs(dist::distinfo::FormatSelftests(results).c_str(), stdout);
    }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return exit_code;
}

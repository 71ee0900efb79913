#include "tools/distinfo/selftest.h"

#include <unistd.h>

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "support/device_memory.h"
#include "support/free_port.h"
#include "tools/distinfo/process_group.h"
#include "tools/distrun/job.h"

namespace dist::distinfo {
namespace {

constexpr int kRanks = 2;

// The last non-empty line of a process's stderr, to explain a failure.
std::string LastLine(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  return lines.empty() ? "" : lines.back();
}

std::vector<std::string> WorkerArgs(const SelftestOptions& options, const std::string& backend,
                                    const std::string& init) {
  // The workers fail on their own (with a message) before the parent kills.
  int64_t worker_timeout_ms = absl::ToInt64Milliseconds(options.timeout) * 3 / 4;
  return {options.self_exe, absl::StrCat("--selftest_worker=", backend),
          absl::StrCat("--selftest_init=", init),
          absl::StrCat("--selftest_timeout_ms=", std::max<int64_t>(worker_timeout_ms, 1000))};
}

// Reads every worker report out of the processes' stdout and combines them.
void Evaluate(const std::vector<ProcessOutcome>& outcomes, SelftestResult& result) {
  std::map<int, nlohmann::json> reports;
  for (const ProcessOutcome& outcome : outcomes) {
    for (absl::string_view line : absl::StrSplit(outcome.out, '\n')) {
      if (!absl::ConsumePrefix(&line, kWorkerMarker)) continue;
      nlohmann::json report = nlohmann::json::parse(line, nullptr, false);
      if (report.is_discarded() || !report.contains("rank")) continue;
      reports[report["rank"].get<int>()] = report;
    }
  }
  std::vector<std::string> problems;
  std::map<std::string, SelftestStep> steps;
  std::vector<std::string> order;
  for (const auto& [rank, report] : reports) {
    if (!report.contains("steps")) continue;
    for (const nlohmann::json& s : report["steps"]) {
      std::string name = s.value("name", "?");
      if (!steps.count(name)) {
        order.push_back(name);
        steps[name] = {name, true, 0, ""};
      }
      SelftestStep& step = steps[name];
      step.ms = std::max(step.ms, s.value("ms", 0.0));
      if (!s.value("ok", false)) {
        step.ok = false;
        std::string error = absl::StrCat("rank ", rank, ": ", name, ": ", s.value("error", ""));
        if (step.error.empty()) step.error = error;
        problems.push_back(error);
      }
    }
  }
  for (const std::string& name : order) result.steps.push_back(steps[name]);
  for (int rank = 0; rank < kRanks; ++rank) {
    if (reports.count(rank)) continue;
    // Which process was it? Locally process i is rank i; under mpirun there
    // is one process for all.
    const ProcessOutcome& outcome = outcomes[outcomes.size() == 1 ? 0 : rank];
    std::string why = outcome.Describe();
    std::string last = LastLine(outcome.err);
    if (last.empty()) last = LastLine(outcome.out);
    problems.push_back(absl::StrCat("rank ", rank, " reported nothing (", why, ")",
                                    last.empty() ? "" : absl::StrCat(": ", last)));
  }
  bool all_exited_ok = std::all_of(outcomes.begin(), outcomes.end(),
                                   [](const ProcessOutcome& o) { return o.succeeded(); });
  if (problems.empty() && !all_exited_ok) {
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (!outcomes[i].succeeded()) {
        problems.push_back(absl::StrCat("process ", i, " ", outcomes[i].Describe(), ": ",
                                        LastLine(outcomes[i].err)));
      }
    }
  }
  result.passed = problems.empty();
  result.detail = absl::StrJoin(problems, "; ");
}

SelftestResult RunOne(const Report& report, const PluginEntry& backend,
                      const SelftestOptions& options) {
  SelftestResult result;
  result.backend = backend.name;
  if (!backend.usable()) {
    result.skipped = true;
    result.detail =
        absl::StrCat(StatusWord(backend), backend.reason.empty() ? "" : ": ", backend.reason);
    return result;
  }
  const dist_backend_capabilities_t& caps = backend.capabilities;
  bool cpu = caps.device_types & (1u << DIST_DEVICE_CPU);
  bool cuda = caps.device_types & (1u << DIST_DEVICE_CUDA);
  if (!cpu && cuda) {
    // One GPU per rank: NCCL refuses two ranks on one device.
    absl::StatusOr<int> devices = CudaDeviceCount();
    if (!devices.ok() || *devices < kRanks) {
      result.skipped = true;
      result.detail = devices.ok() ? absl::StrCat("needs ", kRanks,
                                                  " CUDA devices (one per rank), found ", *devices)
                                   : std::string(devices.status().message());
      return result;
    }
  }
  const std::string init = report.FindScheme("env") != nullptr   ? "env://"
                           : report.FindScheme("tcp") != nullptr ? "tcp://"
                                                                 : "";
  if (init.empty()) {
    result.skipped = true;
    result.detail = "no env:// or tcp:// rendezvous plugin to start the ranks with";
    return result;
  }
  absl::StatusOr<int> port = PickFreePort("127.0.0.1");
  if (!port.ok()) {
    result.skipped = true;
    result.detail = std::string(port.status().message());
    return result;
  }
  const std::string url = init == "env://" ? init : absl::StrCat("tcp://127.0.0.1:", *port);

  distrun::Job job;
  job.argv = {options.self_exe};
  job.nproc_per_node = kRanks;
  job.master_port = *port;
  std::vector<ProcessSpec> specs;
  if (caps.flags & DIST_CAP_NEEDS_LAUNCHER) {
    // mpirun starts both ranks; they find each other's store through the
    // MASTER_* variables, which mpirun exports with -x.
    std::vector<std::string> env = distrun::RankEnvironment(job, 0, distrun::CurrentEnvironment());
    ProcessSpec spec;
    if (backend.name == "mpich") {
      // MPICH's build under MPICH's own launcher (Hydra), which passes the
      // whole environment and runs as root without flags.
      spec.argv = {"mpiexec.mpich", "-n", "2"};
    } else {
      spec.argv = {"mpirun"};
      if (geteuid() == 0) spec.argv.push_back("--allow-run-as-root");
      for (const char* arg : {"--oversubscribe", "-np", "2", "-x", "MASTER_ADDR", "-x",
                              "MASTER_PORT", "-x", "DIST_INIT_METHOD"}) {
        spec.argv.push_back(arg);
      }
      for (const char* var : {"DIST_PLUGIN_PATH", "DIST_LOG_LEVEL", "LD_LIBRARY_PATH"}) {
        if (std::getenv(var) != nullptr) spec.argv.insert(spec.argv.end(), {"-x", var});
      }
    }
    // The ranks take RANK from OMPI_COMM_WORLD_RANK: drop the parent's.
    std::vector<std::string> mpirun_env;
    for (const std::string& e : env) {
      if (!absl::StartsWith(e, "RANK=") && !absl::StartsWith(e, "LOCAL_RANK=") &&
          !absl::StartsWith(e, "WORLD_SIZE=") && !absl::StartsWith(e, "LOCAL_WORLD_SIZE=")) {
        mpirun_env.push_back(e);
      }
    }
    spec.env = mpirun_env;
    result.launcher = absl::StrJoin(spec.argv, " ");
    for (std::string& arg : WorkerArgs(options, backend.name, url)) spec.argv.push_back(arg);
    specs.push_back(spec);
  } else {
    result.launcher = "local";
    for (int rank = 0; rank < kRanks; ++rank) {
      specs.push_back({WorkerArgs(options, backend.name, url),
                       distrun::RankEnvironment(job, rank, distrun::CurrentEnvironment())});
    }
  }
  absl::Time start = absl::Now();
  std::vector<ProcessOutcome> outcomes = RunProcessGroup(specs, options.timeout, absl::Seconds(5));
  result.elapsed = absl::Now() - start;
  if (outcomes.size() == 1 && !outcomes[0].started) {
    result.passed = false;
    result.detail = absl::StrCat("cannot start ", outcomes[0].start_error,
                                 backend.name == "mpich"
                                     ? "; install MPICH's mpiexec.mpich (apt-get install mpich)"
                                     : "; install Open MPI's mpirun or put it in PATH");
    return result;
  }
  Evaluate(outcomes, result);
  return result;
}

}  // namespace

std::vector<SelftestResult> RunSelftests(const Report& report, const SelftestOptions& options) {
  std::vector<SelftestResult> results;
  for (const PluginEntry& backend : report.backends) {
    if (backend.status == DIST_PLUGIN_SHADOWED) continue;
    // "mpi" selects every MPI build (openmpi, mpich).
    const bool mpi_build = backend.name == "openmpi" || backend.name == "mpich";
    if (!options.only.empty() &&
        std::find(options.only.begin(), options.only.end(), backend.name) == options.only.end() &&
        !(mpi_build &&
          std::find(options.only.begin(), options.only.end(), "mpi") != options.only.end())) {
      continue;
    }
    results.push_back(RunOne(report, backend, options));
  }
  for (const std::string& name : options.only) {
    if (report.FindBackendOrMpi(name) == nullptr) {
      SelftestResult missing;
      missing.backend = name;
      missing.detail = "no such backend plugin in the search path";
      results.push_back(missing);
    }
  }
  return results;
}

}  // namespace dist::distinfo

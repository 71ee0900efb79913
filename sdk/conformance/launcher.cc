#include "sdk/conformance/launcher.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "sdk/conformance/failure.h"
#include "sdk/conformance/report.h"
#include "support/free_port.h"
#include "support/local_launcher.h"

namespace dist::conformance {
namespace {

absl::StatusOr<std::string> TempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  if (base == nullptr) base = std::getenv("TMPDIR");
  if (base == nullptr) base = "/tmp";
  std::string pattern = absl::StrCat(base, "/dist_conformance.XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", std::strerror(errno)));
  }
  return pattern;
}

std::string DescribeExit(const LocalExit& e) {
  if (e.timed_out) return "killed after the overall timeout";
  if (WIFEXITED(e.status)) return absl::StrCat("exit code ", WEXITSTATUS(e.status));
  if (WIFSIGNALED(e.status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(e.status), " (",
                        strsignal(WTERMSIG(e.status)), ")");
  }
  return "ended oddly";
}

// The exit code of a run without failures: a run in which no check ran
// (the backend's probe said it cannot run here) proves nothing, so it fails
// unless the target expects that (a GPU backend on a machine without one);
// then it says so in a line the test command counts as skipped.
int AllSkippedExit(const std::vector<Row>& rows, bool allow_all_skipped) {
  const Row* skipped = nullptr;
  for (const Row& row : rows) {
    if (row.outcome == Outcome::kSkip && skipped == nullptr) skipped = &row;
    // The launcher's own rows ("process ... ended cleanly") are no checks.
    if (row.outcome == Outcome::kPass && !absl::StartsWith(row.check, "process ")) return 0;
  }
  const std::string why = skipped == nullptr ? "no check ran" : skipped->detail;
  if (allow_all_skipped) {
    std::printf("DIST_SKIPPED: every check was skipped: %s\n", why.c_str());
    return 0;
  }
  std::printf(
      "dist_conformance: every check was skipped (%s): nothing was tested; fix what stops the "
      "backend here, or pass --allow_all_skipped where that is expected (a GPU backend on a "
      "machine without a GPU)\n",
      why.c_str());
  return 1;
}

// --only=failure: rank 0 (which never dies) records a row per round and
// brings in its joiners' failures; the other ranks record only what failed
// on them (and a victim its death), so their failures are added as rows.
std::vector<Row> MergeFailureRanks(const std::vector<std::vector<Row>>& per_rank) {
  std::vector<Row> merged = per_rank.empty() ? std::vector<Row>{} : per_rank[0];
  for (size_t r = 1; r < per_rank.size(); ++r) {
    for (Row row : per_rank[r]) {
      if (row.outcome != Outcome::kFail) continue;
      row.detail = absl::StrCat("rank ", r, ": ", row.detail);
      merged.push_back(std::move(row));
    }
  }
  return merged;
}

}  // namespace

int Launch(const LaunchOptions& options) {
  absl::StatusOr<std::string> dir = TempDir();
  if (!dir.ok()) {
    std::fprintf(stderr, "dist_conformance: %s\n", dir.status().ToString().c_str());
    return 2;
  }
  std::string url;
  if (options.init == "file") {
    url = absl::StrCat("file://", *dir, "/rendezvous");
  } else {
    absl::StatusOr<int> port = PickFreePort();
    if (!port.ok()) {
      std::fprintf(stderr, "dist_conformance: %s\n", port.status().ToString().c_str());
      return 2;
    }
    url = absl::StrCat("tcp://127.0.0.1:", *port);
  }
  std::vector<std::string> common = options.worker_args;
  common.push_back("--worker");
  common.push_back("--url=" + url);

  std::vector<LocalProcess> children;
  const auto add = [&](std::string name, std::vector<std::string> argv) {
    children.push_back(LocalProcess{std::move(name), argv.front(), std::move(argv), {}});
  };
  if (options.launcher == "mpirun") {
    std::vector<std::string> argv = {options.mpirun,
                                     "--allow-run-as-root",
                                     "--oversubscribe",
                                     "-np",
                                     absl::StrCat(options.world_size),
                                     options.self};
    argv.insert(argv.end(), common.begin(), common.end());
    argv.push_back("--results_dir=" + *dir);
    add("mpirun", std::move(argv));
  } else if (options.launcher == "mpiexec.mpich") {
    // MPICH's Hydra: runs as root and oversubscribes without flags.
    std::vector<std::string> argv = {"mpiexec.mpich", "-n", absl::StrCat(options.world_size),
                                     options.self};
    argv.insert(argv.end(), common.begin(), common.end());
    argv.push_back("--results_dir=" + *dir);
    add("mpiexec.mpich", std::move(argv));
  } else {
    for (int r = 0; r < options.world_size; ++r) {
      std::vector<std::string> argv = {options.self};
      argv.insert(argv.end(), common.begin(), common.end());
      argv.push_back(absl::StrCat("--rank=", r));
      argv.push_back(absl::StrCat("--world_size=", options.world_size));
      argv.push_back(absl::StrCat("--results_file=", *dir, "/rank", r, ".tsv"));
      add(absl::StrCat("rank ", r), std::move(argv));
    }
  }

  // Wait for all, bounded: past the deadline every process group is killed.
  // A rank that fails does not stop the others: they must name it.
  LocalLaunchOptions launch;
  launch.tool = "dist_conformance";
  launch.timeout = absl::Seconds(options.timeout_s);
  absl::StatusOr<LocalLaunchResult> ended = RunLocalProcesses(children, launch);
  if (!ended.ok()) {
    std::fprintf(stderr, "dist_conformance: %s\n", ended.status().ToString().c_str());
    return 2;
  }

  std::vector<std::vector<Row>> per_rank;
  for (int r = 0; r < options.world_size; ++r) {
    absl::StatusOr<std::vector<Row>> rows = ReadRows(absl::StrCat(*dir, "/rank", r, ".tsv"));
    per_rank.push_back(rows.ok() ? *std::move(rows) : std::vector<Row>{});
  }
  std::vector<Row> merged = options.failure ? MergeFailureRanks(per_rank) : MergeRanks(per_rank);
  std::string sections;  // where ranks were when they ended
  for (int r = 0; r < options.world_size; ++r) {
    const std::string last = LastSection(absl::StrCat(*dir, "/rank", r, ".tsv"));
    if (!last.empty())
      absl::StrAppend(&sections, sections.empty() ? "" : ", ", "rank ", r, ": ", last);
  }
  for (size_t i = 0; i < children.size(); ++i) {
    const LocalExit& e = ended->exits[i];
    // Exit code 1 means "some check failed", which the rows already say.
    const bool died_on_purpose = options.failure && WIFSIGNALED(e.status) && i < per_rank.size() &&
                                 DiedOnPurpose(per_rank[i]);
    const bool clean =
        !e.timed_out &&
        ((WIFEXITED(e.status) && (WEXITSTATUS(e.status) == 0 || WEXITSTATUS(e.status) == 1)) ||
         died_on_purpose);
    merged.push_back(
        Row{absl::StrCat("process ", children[i].name, " ended cleanly"), "-", "-", "-",
            clean ? Outcome::kPass : Outcome::kFail,
            clean ? "" : absl::StrCat(DescribeExit(e), " (last sections: ", sections, ")")});
  }
  std::printf("dist_conformance: %d ranks (%s, %s)\n", options.world_size, options.launcher.c_str(),
              url.c_str());
  PrintTable(merged, options.only_failures, stdout);
  std::error_code ignored;
  std::filesystem::remove_all(*dir, ignored);
  for (const Row& row : merged) {
    if (row.outcome == Outcome::kFail) return 1;
  }
  return AllSkippedExit(merged, options.allow_all_skipped);
}

}  // namespace dist::conformance

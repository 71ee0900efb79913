#include "sdk/conformance/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sdk/conformance/report.h"
#include "tools/common/free_port.h"

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

pid_t Spawn(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);  // its own process group, so a timeout kills all it started
  std::vector<char*> raw;
  for (const std::string& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  execvp(raw[0], raw.data());
  std::fprintf(stderr, "dist_conformance: cannot run %s: %s\n", raw[0], std::strerror(errno));
  _exit(127);
}

struct Child {
  std::string name;
  pid_t pid = -1;
  int status = 0;
  bool done = false;
  bool killed = false;
};

std::string DescribeExit(const Child& c) {
  if (c.killed) return "killed after the overall timeout";
  if (WIFEXITED(c.status)) return absl::StrCat("exit code ", WEXITSTATUS(c.status));
  if (WIFSIGNALED(c.status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(c.status), " (",
                        strsignal(WTERMSIG(c.status)), ")");
  }
  return "ended oddly";
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

  std::vector<Child> children;
  if (options.launcher == "mpirun") {
    std::vector<std::string> argv = {options.mpirun,
                                     "--allow-run-as-root",
                                     "--oversubscribe",
                                     "-np",
                                     absl::StrCat(options.world_size),
                                     options.self};
    argv.insert(argv.end(), common.begin(), common.end());
    argv.push_back("--results_dir=" + *dir);
    children.push_back(Child{"mpirun", Spawn(argv)});
  } else if (options.launcher == "mpiexec.mpich") {
    // MPICH's Hydra: runs as root and oversubscribes without flags.
    std::vector<std::string> argv = {"mpiexec.mpich", "-n", absl::StrCat(options.world_size),
                                     options.self};
    argv.insert(argv.end(), common.begin(), common.end());
    argv.push_back("--results_dir=" + *dir);
    children.push_back(Child{"mpiexec.mpich", Spawn(argv)});
  } else {
    for (int r = 0; r < options.world_size; ++r) {
      std::vector<std::string> argv = {options.self};
      argv.insert(argv.end(), common.begin(), common.end());
      argv.push_back(absl::StrCat("--rank=", r));
      argv.push_back(absl::StrCat("--world_size=", options.world_size));
      argv.push_back(absl::StrCat("--results_file=", *dir, "/rank", r, ".tsv"));
      children.push_back(Child{absl::StrCat("rank ", r), Spawn(argv)});
    }
  }

  // Wait for all, bounded: past the deadline every process group is killed.
  const absl::Time deadline = absl::Now() + absl::Seconds(options.timeout_s);
  size_t running = children.size();
  while (running > 0) {
    for (Child& c : children) {
      if (c.done) continue;
      if (waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
        c.done = true;
        --running;
      }
    }
    if (running == 0) break;
    if (absl::Now() > deadline) {
      for (Child& c : children) {
        if (c.done) continue;
        kill(-c.pid, SIGKILL);
        kill(c.pid, SIGKILL);
        waitpid(c.pid, &c.status, 0);
        c.done = c.killed = true;
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }

  std::vector<std::vector<Row>> per_rank;
  for (int r = 0; r < options.world_size; ++r) {
    absl::StatusOr<std::vector<Row>> rows = ReadRows(absl::StrCat(*dir, "/rank", r, ".tsv"));
    per_rank.push_back(rows.ok() ? *std::move(rows) : std::vector<Row>{});
  }
  std::vector<Row> merged = MergeRanks(per_rank);
  std::string sections;  // where ranks were when they ended
  for (int r = 0; r < options.world_size; ++r) {
    const std::string last = LastSection(absl::StrCat(*dir, "/rank", r, ".tsv"));
    if (!last.empty())
      absl::StrAppend(&sections, sections.empty() ? "" : ", ", "rank ", r, ": ", last);
  }
  for (const Child& c : children) {
    // Exit code 1 means "some check failed", which the rows already say.
    const bool clean = !c.killed && WIFEXITED(c.status) &&
                       (WEXITSTATUS(c.status) == 0 || WEXITSTATUS(c.status) == 1);
    merged.push_back(
        Row{absl::StrCat("process ", c.name, " ended cleanly"), "-", "-", "-",
            clean ? Outcome::kPass : Outcome::kFail,
            clean ? "" : absl::StrCat(DescribeExit(c), " (last sections: ", sections, ")")});
  }
  std::printf("dist_conformance: %d ranks (%s, %s)\n", options.world_size, options.launcher.c_str(),
              url.c_str());
  PrintTable(merged, options.only_failures, stdout);
  std::error_code ignored;
  std::filesystem::remove_all(*dir, ignored);
  for (const Row& row : merged) {
    if (row.outcome == Outcome::kFail) return 1;
  }
  return 0;
}

}  // namespace dist::conformance

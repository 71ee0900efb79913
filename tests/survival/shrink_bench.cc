// Time from a SIGKILLed rank to the first successful collective of the
// survivors' shrunk group (and to their first error), and of the group
// grown back with a process started at the failure (joiners included),
// gloo and shm at N=4 and N=8, with the default failure detector
// (DIST_FAILURE_DETECT_MS=500).
// Median of --repeats runs. bazel run //tests/survival:shrink_bench
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/survival/scenario.h"

int main(int argc, char** argv) {
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--repeats=", 0) == 0) repeats = std::max(1, std::atoi(arg.c_str() + 10));
  }
  const std::string dir = absl::StrCat("/tmp/dist-shrink-bench-", getpid());
  std::printf(
      "| backend | N | SIGKILL -> first error (ms) | SIGKILL -> first shrunk collective (ms) | "
      "SIGKILL -> first grown collective (ms) |\n");
  std::printf("|---|---|---|---|---|\n");
  std::fflush(stdout);  // the ranks are forked: no copies of unwritten output
  int status = 0;
  for (const char* backend : {"gloo", "shm"}) {
    for (int world : {4, 8}) {
      std::vector<double> to_error, to_ok, to_grown;
      for (int r = 0; r < repeats; ++r) {
        dist_survival::Scenario s =
            dist_survival::MakeScenario(backend, world, world / 2, dist_survival::Failure::kKill);
        s.grow = true;
        s.dir = absl::StrCat(dir, "-", backend, world, "-", r);
        if (std::system(absl::StrCat("rm -rf ", s.dir, " && mkdir -p ", s.dir).c_str()) != 0) {
          std::fprintf(stderr, "cannot make %s\n", s.dir.c_str());
          return 1;
        }
        const dist_survival::Outcome o = dist_survival::Run(s);
        for (size_t k = 0; k < o.rank_errors.size(); ++k) {
          if (!o.rank_errors[k].empty()) {
            std::fprintf(stderr, "%s N=%d slot %zu: %s\n", backend, world, k,
                         o.rank_errors[k].c_str());
            status = 1;
          }
        }
        to_error.push_back(absl::ToDoubleMilliseconds(o.failure_to_error));
        to_ok.push_back(absl::ToDoubleMilliseconds(o.failure_to_first_collective));
        to_grown.push_back(absl::ToDoubleMilliseconds(o.failure_to_grown_collective));
        if (std::system(absl::StrCat("rm -rf ", s.dir).c_str()) != 0) status = 1;
      }
      std::sort(to_error.begin(), to_error.end());
      std::sort(to_ok.begin(), to_ok.end());
      std::sort(to_grown.begin(), to_grown.end());
      std::printf("| %s | %d | %.0f | %.0f | %.0f |\n", backend, world,
                  to_error[to_error.size() / 2], to_ok[to_ok.size() / 2],
                  to_grown[to_grown.size() / 2]);
      std::fflush(stdout);
    }
  }
  return status;
}

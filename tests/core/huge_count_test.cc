// Through the real core on the real gloo and shm plugins (world of one over
// file://): an all_reduce claiming 2^61+1 float64 elements on a 16-element
// buffer is an error from the core (it returned OK on gloo and crashed shm
// ranks), and the process survives to say so. Each backend runs in a child.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dist/dist.h"
#include "gtest/gtest.h"

namespace {

int RunBackend(const std::string& backend) {
  const std::string url = absl::StrCat("file://", std::getenv("TEST_TMPDIR"), "/store-", backend,
                                       "?rank=0&world_size=1");
  dist_init_options_t options = dist_init_options_default();
  options.backend = backend.c_str();
  options.init_method = url.c_str();
  options.timeout_ms = 20000;
  dist_process_group_t* group = nullptr;
  if (dist_error_t* e = dist_init(&options, &group)) {
    std::fprintf(stderr, "%s: init: %s\n", backend.c_str(), dist_error_message(e));
    return 2;
  }
  std::vector<double> data(16, 1.0);
  dist_buffer_t b =
      dist_make_buffer(data.data(), (uint64_t{1} << 61) + 1, DIST_FLOAT64, dist_cpu());
  dist_error_t* e = dist_all_reduce(group, &b, &b, DIST_SUM, nullptr);
  if (e == nullptr) {
    std::fprintf(stderr, "%s: all_reduce returned OK\n", backend.c_str());
    return 3;
  }
  std::fprintf(stderr, "%s: %s\n", backend.c_str(), dist_error_message(e));
  const bool named = dist_error_code(e) == DIST_INVALID_ARGUMENT &&
                     absl::StrContains(dist_error_message(e), "is larger than any buffer can be");
  dist_error_destroy(e);
  // The group still works with a true count.
  b.count = data.size();
  if (dist_error_t* again = dist_all_reduce(group, &b, &b, DIST_SUM, nullptr)) {
    std::fprintf(stderr, "%s: %s\n", backend.c_str(), dist_error_message(again));
    return 4;
  }
  dist_destroy(group);
  return named && data[0] == 1.0 ? 0 : 5;
}

TEST(HugeCount, IsAnErrorOnEveryBackendAndNothingCrashes) {
  for (const std::string backend : {"gloo", "shm"}) {
    const pid_t pid = fork();
    if (pid == 0) _exit(RunBackend(backend));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << backend << ": status " << status;
  }
}

}  // namespace

// Abseil's deadlock detection after dist_init (core/lock_checks.h): Debian's
// Abseil aborts a process that takes two mutexes in both orders; after
// dist_init it does not, unless DIST_ABSL_DEADLOCK_DETECTION=1 keeps the
// check. Through the real core on shm, a world of one over file://; each
// case runs in a child process.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dist/dist.h"
#include "gtest/gtest.h"

namespace {

// Initializes a group of one, then takes two mutexes in one order and then
// in the other: a lock-order cycle, though never a deadlock here.
int InitThenInvertLockOrder(const std::string& name) {
  const std::string url =
      absl::StrCat("file://", std::getenv("TEST_TMPDIR"), "/store-", name, "?rank=0&world_size=1");
  dist_init_options_t options = dist_init_options_default();
  options.backend = "shm";
  options.init_method = url.c_str();
  options.timeout_ms = 20000;
  dist_process_group_t* group = nullptr;
  if (dist_error_t* e = dist_init(&options, &group)) {
    std::fprintf(stderr, "init: %s\n", dist_error_message(e));
    return 2;
  }
  absl::Mutex a, b;
  a.Lock();
  b.Lock();
  b.Unlock();
  a.Unlock();
  b.Lock();
  a.Lock();  // absl's detection, when on, aborts here
  a.Unlock();
  b.Unlock();
  dist_destroy(group);
  return 0;
}

int RunChild(const std::string& name, bool keep) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (keep) setenv("DIST_ABSL_DEADLOCK_DETECTION", "1", 1);
    _exit(InitThenInvertLockOrder(name));
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

TEST(LockChecks, DistInitTurnsOffAbseilsDeadlockAbort) {
  const int status = RunChild("off", /*keep=*/false);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST(LockChecks, TheVariableKeepsIt) {
  // The control: the check is on in this Abseil, and the variable keeps it.
  const int status = RunChild("keep", /*keep=*/true);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT) << "status " << status;
}

}  // namespace

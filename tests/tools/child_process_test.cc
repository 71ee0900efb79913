// distinfo's child runner: real forked processes that finish, exit, crash
// and hang, each reported as it ended.
#include "tools/distinfo/child_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/common/signal_name.h"

namespace dist::distinfo {
namespace {

// A real segfault, as in a broken plugin. Under --config=asan it must still
// end the child with SIGSEGV: UBSan must not report the NULL store first, nor
// ASan's handler turn the fault into an abort.
__attribute__((no_sanitize("undefined"), noinline)) void Segfault() {
  signal(SIGSEGV, SIG_DFL);
  static int* volatile target = nullptr;
  *target = 1;
}

TEST(ChildProcessTest, ReturnsWhatEachChildWroteAndHowItEnded) {
  const absl::Time start = absl::Now();
  std::vector<ChildResult> results =
      RunInChildren({
                        [](int fd) { return WriteAll(fd, "answer 42\n") ? 0 : 9; },
                        [](int fd) { return 3; },
                        [](int fd) {
                          WriteAll(fd, "stage probe\n");
                          Segfault();
                          return 0;
                        },
                        [](int fd) {
                          WriteAll(fd, "stage dlopen\n");
                          std::abort();
                          return 0;
                        },
                        [](int fd) {
                          WriteAll(fd, "stage probe\n");
                          for (;;) pause();
                          return 0;
                        },
                    },
                    absl::Milliseconds(500));
  ASSERT_EQ(results.size(), 5u);

  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[0].output, "answer 42\n");
  EXPECT_EQ(results[0].exit_code, 0);

  EXPECT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].exit_code, 3);
  EXPECT_EQ(results[1].signal, 0);
  EXPECT_EQ(results[1].output, "");

  EXPECT_FALSE(results[2].ok());
  EXPECT_EQ(results[2].signal, SIGSEGV);
  EXPECT_FALSE(results[2].timed_out);
  EXPECT_EQ(results[2].output, "stage probe\n");  // written before it died

  EXPECT_EQ(results[3].signal, SIGABRT);
  EXPECT_EQ(results[3].output, "stage dlopen\n");

  EXPECT_TRUE(results[4].timed_out);
  EXPECT_EQ(results[4].signal, SIGKILL);
  EXPECT_EQ(results[4].output, "stage probe\n");

  // All ran at once, bounded by the one timeout.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(ChildProcessTest, FinishedChildrenDoNotWaitForTheTimeout) {
  const absl::Time start = absl::Now();
  std::vector<ChildResult> results =
      RunInChildren({[](int fd) { return 0; }, [](int fd) { return 0; }}, absl::Seconds(30));
  EXPECT_TRUE(results[0].ok());
  EXPECT_TRUE(results[1].ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(ChildProcessTest, ChildStdoutGoesToStderr) {
  std::vector<ChildResult> results = RunInChildren(
      {[](int fd) {
        struct stat out, err;
        const bool same = fstat(STDOUT_FILENO, &out) == 0 && fstat(STDERR_FILENO, &err) == 0 &&
                          out.st_dev == err.st_dev && out.st_ino == err.st_ino;
        WriteAll(fd, same ? "same" : "different");
        return 0;
      }},
      absl::Seconds(10));
  EXPECT_EQ(results[0].output, "same");
}

TEST(ChildProcessTest, LargeOutputArrivesWhole) {
  const std::string big(1 << 20, 'x');  // more than a pipe holds
  std::vector<ChildResult> results =
      RunInChildren({[&big](int fd) { return WriteAll(fd, big) ? 0 : 1; }}, absl::Seconds(30));
  EXPECT_TRUE(results[0].ok());
  EXPECT_EQ(results[0].output.size(), big.size());
}

TEST(ChildProcessTest, SignalNamesSayTheSignalAndWhatItMeans) {
  EXPECT_EQ(tools::SignalDescription(SIGSEGV), "SIGSEGV (Segmentation fault)");
  EXPECT_EQ(tools::SignalDescription(SIGABRT), "SIGABRT (Aborted)");
  EXPECT_EQ(tools::SignalDescription(1234), "signal 1234");
}

}  // namespace
}  // namespace dist::distinfo

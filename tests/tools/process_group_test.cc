// distinfo's process runner: output capture, exit codes, the deadline and
// stopping the others after a failure, with real processes.
#include "tools/distinfo/process_group.h"

#include <signal.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace dist::distinfo {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Env() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

ProcessSpec Sh(const std::string& script) { return {{"/bin/sh", "-c", script}, Env()}; }

TEST(ProcessGroupTest, CapturesOutputAndExitCodes) {
  std::vector<ProcessOutcome> out = RunProcessGroup({Sh("echo hello; echo oops >&2"), Sh("exit 0")},
                                                    absl::Seconds(30), absl::Seconds(5));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].succeeded());
  EXPECT_EQ(out[0].out, "hello\n");
  EXPECT_EQ(out[0].err, "oops\n");
  EXPECT_TRUE(out[1].succeeded());
}

TEST(ProcessGroupTest, DeadlineKillsEverything) {
  absl::Time start = absl::Now();
  std::vector<ProcessOutcome> out =
      RunProcessGroup({Sh("sleep 30"), Sh("sleep 30 & wait")}, absl::Seconds(1), absl::Seconds(5));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (const ProcessOutcome& o : out) {
    EXPECT_TRUE(o.killed_at_deadline);
    EXPECT_EQ(o.term_signal, SIGKILL);
    EXPECT_THAT(o.Describe(), HasSubstr("timeout"));
  }
}

TEST(ProcessGroupTest, FailureStopsTheOthersAfterTheGrace) {
  absl::Time start = absl::Now();
  std::vector<ProcessOutcome> out =
      RunProcessGroup({Sh("exit 3"), Sh("sleep 30")}, absl::Seconds(30), absl::Milliseconds(500));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(out[0].exit_code, 3);
  EXPECT_EQ(out[0].Describe(), "exited with code 3");
  EXPECT_TRUE(out[1].killed_after_failure);
}

TEST(ProcessGroupTest, MissingProgram) {
  std::vector<ProcessOutcome> out =
      RunProcessGroup({{{"/nonexistent/prog"}, Env()}}, absl::Seconds(5), absl::Seconds(1));
  EXPECT_FALSE(out[0].started);
  EXPECT_THAT(out[0].Describe(), HasSubstr("did not start: /nonexistent/prog"));
}

}  // namespace
}  // namespace dist::distinfo

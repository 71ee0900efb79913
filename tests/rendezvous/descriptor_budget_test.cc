// A rank that hosts the store keeps descriptors for itself. Rank 0 of a
// two-rank job (hello_allreduce on gloo over env://) runs at ulimit -n 1024
// and hosts the store; before rank 1 starts, a neighbour on loopback opens
// 1,100 connections to that store and holds them: silent ones (never a
// hello) or logged-in idle ones, on a store with and without a token. The
// job must still start and complete within seconds, its all-reduce checked
// by each rank against the sum it computes itself.
//
// Without the store's descriptor budget, the logged-in crowd locked the job
// out (the store evicted each newcomer it had just accepted, so rank 1 never
// got in: "could not reach the store"), and the silent crowd filled rank 0's
// table so that Gloo could not open its device ("Too many open files").
#include <sys/resource.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/rendezvous/attacker.h"
#include "tests/rendezvous/test_support.h"

namespace dist::testing {
namespace {

constexpr int kRankFileLimit = 1024;
constexpr int kCrowd = 1100;

struct Case {
  Crowd crowd;
  bool token;
};

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(info.param.crowd == Crowd::kSilent ? "Silent" : "LoggedInIdle",
                      info.param.token ? "WithToken" : "WithoutToken");
}

class DescriptorBudget : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    // The crowd lives in this process: it needs more than 1,100 descriptors.
    rlimit files{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
    if (files.rlim_max < kCrowd + 256) {
      GTEST_SKIP() << "the hard open-files limit (" << files.rlim_max << ") is below "
                   << kCrowd + 256 << ": this test cannot hold its crowd";
    }
    files.rlim_cur = files.rlim_max;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &files), 0);
  }

  // One rank of the job at ulimit -n 1024 (prlimit sets it for the rank).
  std::unique_ptr<Process> StartRank(int rank, int port, const std::string& token) {
    EnvList env = {{"DIST_BACKEND", "gloo"},     {"DIST_INIT_METHOD", "env://"},
                   {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", absl::StrCat(port)},
                   {"RANK", absl::StrCat(rank)}, {"WORLD_SIZE", "2"},
                   {"DIST_TIMEOUT", "30"}};
    if (!token.empty()) env.emplace_back("DIST_STORE_TOKEN", token);
    auto process = Process::Start(
        {"/usr/bin/prlimit", absl::StrCat("--nofile=", kRankFileLimit, ":", kRankFileLimit), "--",
         Runfile("examples/hello_allreduce/hello_allreduce")},
        env);
    EXPECT_TRUE(process.ok()) << process.status();
    return process.ok() ? std::move(*process) : nullptr;
  }
};

TEST_P(DescriptorBudget, AJobCompletesWhileACrowdHoldsItsStore) {
  const Case& test = GetParam();
  const std::string token = test.token ? "budget-secret" : "";
  const int port = FreePort();
  auto rank0 = StartRank(0, port, token);
  ASSERT_NE(rank0, nullptr);

  // Rank 0's store listens once it reached the rendezvous.
  int probe = -1;
  for (const absl::Time until = absl::Now() + absl::Seconds(20); probe < 0 && absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(20))) {
    probe = RawConnect(port);
  }
  ASSERT_GE(probe, 0) << "rank 0's store never listened on port " << port;
  close(probe);

  // Silent: the kernel takes every connection into the backlog. Logged in:
  // each newcomer evicts an older idle one and is never evicted itself.
  Sockets crowd;
  EXPECT_EQ(OpenCrowd(port, kCrowd, test.crowd, token, &crowd), kCrowd);

  const absl::Time start = absl::Now();
  auto rank1 = StartRank(1, port, token);
  ASSERT_NE(rank1, nullptr);
  const ProcessResult result1 = rank1->Wait(absl::Seconds(60));
  const ProcessResult result0 = rank0->Wait(absl::Seconds(30));
  const absl::Duration took = absl::Now() - start;
  for (const ProcessResult* result : {&result0, &result1}) {
    SCOPED_TRACE(result->output);
    EXPECT_EQ(result->exit_code, 0);
    EXPECT_TRUE(absl::StrContains(result->output, "correct"));
  }
  // The ranks' timeout is 30 s: a job locked out fails there, not here.
  EXPECT_LT(took, absl::Seconds(15)) << "the job took " << took;
}

INSTANTIATE_TEST_SUITE_P(Crowds, DescriptorBudget,
                         ::testing::Values(Case{Crowd::kSilent, false}, Case{Crowd::kSilent, true},
                                           Case{Crowd::kLoggedIn, false},
                                           Case{Crowd::kLoggedIn, true}),
                         Name);

}  // namespace
}  // namespace dist::testing

// End to end through the core (//core:dist): dist_rendezvous() finds the
// bundled rendezvous plugin and runs its join check over our stores. These
// check the join-check messages the stores must make possible: who is
// missing, two processes on one rank, disagreeing world sizes.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/rendezvous/process_helpers.h"

namespace dist::testing {
namespace {

std::unique_ptr<Process> StartCoreWorker(const Job& job, int rank, int64_t timeout_ms,
                                         int world_size_hint = -1) {
  std::vector<std::string> argv = {Runfile("tests/rendezvous/core_worker"),
                                   "--url=" + job.Url(rank),
                                   absl::StrCat("--timeout_ms=", timeout_ms)};
  if (world_size_hint > 0) argv.push_back(absl::StrCat("--world_size=", world_size_hint));
  auto process = Process::Start(argv, job.Env(rank));
  EXPECT_TRUE(process.ok()) << process.status();
  return process.ok() ? std::move(*process) : nullptr;
}

class CoreRendezvous : public ::testing::TestWithParam<std::string> {};

TEST_P(CoreRendezvous, FourRanksJoinAndShareTheStore) {
  const Job job = Job::Make(GetParam(), 4);
  std::vector<std::unique_ptr<Process>> ranks;
  for (int rank = 0; rank < 4; ++rank) ranks.push_back(StartCoreWorker(job, rank, 20000));
  for (int rank = 0; rank < 4; ++rank) {
    const ProcessResult result = ranks[rank]->Wait(absl::Seconds(60));
    SCOPED_TRACE(result.output);
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_TRUE(absl::StrContains(result.output,
                                  absl::StrCat("joined rank=", rank, " world_size=4")));
    EXPECT_TRUE(absl::StrContains(result.output, "saw 4 keys"));
  }
}

TEST_P(CoreRendezvous, MissingRankIsNamedWithinTheTimeout) {
  const Job job = Job::Make(GetParam(), 4);
  std::vector<std::unique_ptr<Process>> ranks;
  for (int rank : {0, 1, 3}) ranks.push_back(StartCoreWorker(job, rank, 2000));
  for (auto& rank : ranks) {
    const ProcessResult result = rank->Wait(absl::Seconds(30));
    SCOPED_TRACE(result.output);
    EXPECT_FALSE(result.timed_out);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(absl::StrContains(result.output, "3 of 4 ranks joined, missing rank 2"));
    EXPECT_LT(result.elapsed, absl::Seconds(15));
  }
}

TEST_P(CoreRendezvous, DisagreeingWorldSizesFailOnBothSides) {
  Job job = Job::Make(GetParam(), 2);
  auto rank0 = StartCoreWorker(job, 0, 5000);
  // Rank 1 claims world size 3 (the hint overrides its URL/env).
  auto rank1 = StartCoreWorker(job, 1, 5000, 3);
  for (auto* process : {rank0.get(), rank1.get()}) {
    const ProcessResult result = process->Wait(absl::Seconds(30));
    SCOPED_TRACE(result.output);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(absl::StrContains(result.output, "world size mismatch"));
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, CoreRendezvous, ::testing::Values("tcp", "env", "file"),
                         [](const auto& info) { return info.param; });

class CoreDuplicateRank : public ::testing::TestWithParam<std::string> {};

// Two live processes on rank 1 (rank 2 never comes): the core's rank claim
// fails on one, which tells every other rank, so all three are told.
TEST_P(CoreDuplicateRank, AllAreTold) {
  const Job job = Job::Make(GetParam(), 3);
  auto rank0 = StartCoreWorker(job, 0, 4000);
  auto first = StartCoreWorker(job, 1, 4000);
  auto second = StartCoreWorker(job, 1, 4000);
  const ProcessResult a = first->Wait(absl::Seconds(30));
  const ProcessResult b = second->Wait(absl::Seconds(30));
  const ProcessResult host = rank0->Wait(absl::Seconds(30));
  for (const ProcessResult* result : {&a, &b, &host}) {
    EXPECT_EQ(result->exit_code, 1) << result->output;
    EXPECT_TRUE(absl::StrContains(result->output, "rank 1 claimed by two processes"))
        << result->output;
    EXPECT_LT(result->elapsed, absl::Seconds(4)) << "told at once, not at the timeout";
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, CoreDuplicateRank, ::testing::Values("tcp", "file"),
                         [](const auto& info) { return info.param; });

// The late case of the race above, made certain: both rank-1 processes have
// failed and left the file before rank 0 arrives. Rank 0 must hear why the
// rendezvous in the file failed, at once, not that the file is stale.
TEST(CoreFileRendezvous, RankArrivingAfterAFailedJoinHearsWhy) {
  const Job job = Job::Make("file", 3);
  auto first = StartCoreWorker(job, 1, 4000);
  auto second = StartCoreWorker(job, 1, 4000);
  for (auto* process : {first.get(), second.get()}) {
    const ProcessResult result = process->Wait(absl::Seconds(30));
    ASSERT_EQ(result.exit_code, 1) << result.output;
    ASSERT_TRUE(absl::StrContains(result.output, "rank 1 claimed by two processes"))
        << result.output;
  }
  const ProcessResult late = StartCoreWorker(job, 0, 4000)->Wait(absl::Seconds(30));
  EXPECT_EQ(late.exit_code, 1) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "the rendezvous in it already failed")) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "rank 1 claimed by two processes")) << late.output;
  EXPECT_LT(late.elapsed, absl::Seconds(4)) << "told at once, not at the timeout";
}

// A rank never comes, so the others time out; a rank that opens the file
// afterwards must be told at once that the rendezvous failed, and why (the
// timeout naming the missing rank), not that ranks of an earlier job left.
TEST(CoreFileRendezvous, RankArrivingAfterATimedOutJoinHearsWhy) {
  const Job job = Job::Make("file", 3);
  auto rank0 = StartCoreWorker(job, 0, 1500);
  auto rank1 = StartCoreWorker(job, 1, 1500);
  for (auto* process : {rank0.get(), rank1.get()}) {
    const ProcessResult result = process->Wait(absl::Seconds(30));
    ASSERT_EQ(result.exit_code, 1) << result.output;
    ASSERT_TRUE(absl::StrContains(result.output, "2 of 3 ranks joined, missing rank 2"))
        << result.output;
  }
  const ProcessResult late = StartCoreWorker(job, 2, 4000)->Wait(absl::Seconds(30));
  EXPECT_EQ(late.exit_code, 1) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "ERROR FAILED_PRECONDITION")) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "the rendezvous in it already failed")) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "timed out after 1.5 s")) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "2 of 3 ranks joined, missing rank 2")) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "delete the file")) << late.output;
  EXPECT_FALSE(absl::StrContains(late.output, "earlier job")) << late.output;
  EXPECT_LT(late.elapsed, absl::Seconds(3)) << "told at once, not at the timeout";
}

}  // namespace
}  // namespace dist::testing

// End to end through the core (//core:dist): dist_rendezvous() finds the
// bundled rendezvous plugin and runs its join check over our stores. These
// check the join-check messages the stores must make possible: who is
// missing, two processes on one rank, disagreeing world sizes.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "plugins/store/tcp_store_client.h"
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
    EXPECT_TRUE(
        absl::StrContains(result.output, absl::StrCat("joined rank=", rank, " world_size=4")));
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

// tcp:// and env://: rank 0's server stays up after a failed join while
// ranks are still connected to it (up to rank 0's timeout). Before rank 0's
// server kept failures, a rank arriving then completed the arrival count and
// "joined" a rendezvous that was over (and so did a rank still waiting with
// a longer timeout), to fail later on a key nobody would set or on the
// server stopping. Now the failing rank reports its reason to the server
// and everyone after hears it.
class CoreTcpLateRank : public ::testing::TestWithParam<std::string> {
 protected:
  // A connection of the test's own that keeps rank 0's server lingering
  // after rank 0 failed (as a slow rank would), so that rank 2 can arrive
  // while it still serves. Connected (with retries) once rank 0 listens; it
  // makes a request, as a rank does: the server lingers only for clients
  // that used it, not for ones that merely logged in.
  std::unique_ptr<store::TcpStoreClient> Keeper(const Job& job) {
    store::TcpStoreClientOptions options;
    options.host = "127.0.0.1";
    options.port = job.port;
    options.timeout = absl::Seconds(10);
    auto keeper = store::TcpStoreClient::Connect(options);
    EXPECT_TRUE(keeper.ok()) << keeper.status();
    if (!keeper.ok()) return nullptr;
    EXPECT_TRUE((*keeper)->Set("test/keeper", "a slow rank").ok());
    return std::move(*keeper);
  }

  // Rank 2 arrives late and must be refused at once with the reason.
  void ExpectLateRankHearsWhy(const Job& job, const std::string& reporter,
                              const std::string& timed_out) {
    auto process = StartCoreWorker(job, 2, 4000);
    ASSERT_NE(process, nullptr);
    const ProcessResult late = process->Wait(absl::Seconds(30));
    EXPECT_EQ(late.exit_code, 1) << late.output;
    EXPECT_FALSE(absl::StrContains(late.output, "joined rank=")) << late.output;
    EXPECT_TRUE(absl::StrContains(
        late.output, absl::StrCat("ERROR FAILED_PRECONDITION: tcp://127.0.0.1:", job.port,
                                  ": the rendezvous on this store already failed: rendezvous ")))
        << late.output;
    EXPECT_TRUE(absl::StrContains(late.output, timed_out)) << late.output;
    EXPECT_TRUE(absl::StrContains(late.output, "2 of 3 ranks joined, missing rank 2"))
        << late.output;
    EXPECT_TRUE(absl::StrContains(late.output, absl::StrCat("(reported by ", reporter, " on ")))
        << late.output;
    EXPECT_TRUE(absl::StrContains(late.output, "; start all ranks again\n")) << late.output;
    EXPECT_LT(late.elapsed, absl::Seconds(3)) << "told at once, not at its 4 s timeout";
  }
};

// Rank 0 (the host) times out first: rank 1, still waiting with a longer
// timeout, hears why at once, and so does rank 2 arriving later.
TEST_P(CoreTcpLateRank, HostFailsAndLateRankHearsWhy) {
  const Job job = Job::Make(GetParam(), 3);
  auto rank0 = StartCoreWorker(job, 0, 2500);
  auto rank1 = StartCoreWorker(job, 1, 20000);
  auto keeper = Keeper(job);
  ASSERT_NE(keeper, nullptr);
  const ProcessResult one = rank1->Wait(absl::Seconds(30));
  EXPECT_EQ(one.exit_code, 1) << one.output;
  EXPECT_FALSE(absl::StrContains(one.output, "joined rank=")) << one.output;
  EXPECT_TRUE(absl::StrContains(one.output, "the rendezvous on this store already failed"))
      << one.output;
  EXPECT_TRUE(absl::StrContains(one.output, "timed out after 2.5 s: 2 of 3 ranks joined"))
      << one.output;
  EXPECT_LT(one.elapsed, absl::Seconds(10)) << "told when rank 0 failed, not at 20 s";

  ExpectLateRankHearsWhy(job, "rank 0", "timed out after 2.5 s");

  keeper.reset();  // rank 0's server may stop now
  const ProcessResult host = rank0->Wait(absl::Seconds(30));
  EXPECT_EQ(host.exit_code, 1) << host.output;
  EXPECT_TRUE(absl::StrContains(host.output, "ERROR DEADLINE_EXCEEDED"));
  EXPECT_TRUE(absl::StrContains(host.output,
                                "timed out after 2.5 s: 2 of 3 ranks joined, "
                                "missing rank 2"))
      << host.output;
}

// Rank 1 (a client) times out first: it reports to rank 0's server, so the
// host, waiting with a longer timeout, hears why at once, and so does rank
// 2 arriving later (told by rank 1's reason).
TEST_P(CoreTcpLateRank, ClientRankFailsAndHostAndLateRankHearWhy) {
  const Job job = Job::Make(GetParam(), 3);
  auto rank0 = StartCoreWorker(job, 0, 20000);
  auto rank1 = StartCoreWorker(job, 1, 1500);
  auto keeper = Keeper(job);
  ASSERT_NE(keeper, nullptr);
  const ProcessResult one = rank1->Wait(absl::Seconds(30));
  EXPECT_EQ(one.exit_code, 1) << one.output;
  EXPECT_TRUE(absl::StrContains(one.output, "ERROR DEADLINE_EXCEEDED")) << one.output;
  EXPECT_TRUE(absl::StrContains(one.output,
                                "timed out after 1.5 s: 2 of 3 ranks joined, "
                                "missing rank 2"))
      << one.output;

  ExpectLateRankHearsWhy(job, "rank 1", "timed out after 1.5 s");

  keeper.reset();
  const ProcessResult host = rank0->Wait(absl::Seconds(30));
  EXPECT_EQ(host.exit_code, 1) << host.output;
  EXPECT_FALSE(absl::StrContains(host.output, "joined rank=")) << host.output;
  EXPECT_TRUE(absl::StrContains(host.output, "ERROR FAILED_PRECONDITION")) << host.output;
  EXPECT_TRUE(absl::StrContains(host.output, "the rendezvous on this store already failed"))
      << host.output;
  EXPECT_TRUE(absl::StrContains(host.output, "(reported by rank 1 on ")) << host.output;
  EXPECT_LT(host.elapsed, absl::Seconds(10)) << "told when rank 1 failed, not at 20 s";
}

INSTANTIATE_TEST_SUITE_P(Schemes, CoreTcpLateRank, ::testing::Values("tcp", "env"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dist::testing

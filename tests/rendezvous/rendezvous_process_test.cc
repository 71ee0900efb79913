// Every scheme at world sizes 1 to 8 with real processes: each rank
// resolves, sets its key, reads every other rank's key and checks its value.
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/rendezvous/process_helpers.h"

namespace dist::testing {
namespace {

class ExchangeTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ExchangeTest, EveryRankSeesEveryKey) {
  const auto& [scheme, world_size] = GetParam();
  const Job job = Job::Make(scheme, world_size);
  std::vector<std::unique_ptr<Process>> ranks(world_size);
  // Highest rank first: the others must wait and retry for rank 0.
  for (int rank = world_size - 1; rank >= 0; --rank)
    ranks[rank] = job.StartWorker(rank, "exchange");
  for (int rank = 0; rank < world_size; ++rank) {
    ASSERT_NE(ranks[rank], nullptr);
    const ProcessResult result = ranks[rank]->Wait(absl::Seconds(60));
    SCOPED_TRACE(absl::StrCat(scheme, " rank ", rank, " output:\n", result.output));
    EXPECT_FALSE(result.timed_out);
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_TRUE(absl::StrContains(
        result.output, absl::StrCat("resolved rank=", rank, " world_size=", world_size)));
    EXPECT_TRUE(absl::StrContains(result.output, absl::StrCat("saw ", world_size, " keys")));
    if (scheme == "env") {
      EXPECT_TRUE(absl::StrContains(
          result.output, absl::StrCat("local_rank=", rank, " local_world_size=", world_size)));
    }
    EXPECT_TRUE(absl::StrContains(result.output, "\nOK\n"));
  }
  if (scheme == "file") {
    struct stat info;
    EXPECT_NE(stat(job.file.c_str(), &info), 0) << "the last rank out must remove " << job.file;
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, ExchangeTest,
                         ::testing::Combine(::testing::Values("tcp", "env", "file"),
                                            ::testing::Range(1, 9)),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param), "_world",
                                               std::get<1>(info.param));
                         });

}  // namespace
}  // namespace dist::testing

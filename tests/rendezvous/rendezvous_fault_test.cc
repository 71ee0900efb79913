// Faults with real processes: concurrent add from many processes, a rank
// that never joins, the store server killed mid-rendezvous, a wrong token,
// stale rendezvous files, and the standalone dist_store_server.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/rendezvous/process_helpers.h"

namespace dist::testing {
namespace {

class PerScheme : public ::testing::TestWithParam<std::string> {};

TEST_P(PerScheme, ConcurrentAddFromManyProcessesLosesNothing) {
  constexpr int kRanks = 6, kAdds = 200;
  const Job job = Job::Make(GetParam(), kRanks);
  std::vector<std::unique_ptr<Process>> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.push_back(job.StartWorker(rank, "add", 30000, {absl::StrCat("--count=", kAdds)}));
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    const ProcessResult result = ranks[rank]->Wait(absl::Seconds(90));
    SCOPED_TRACE(result.output);
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_TRUE(absl::StrContains(result.output, absl::StrCat("counter=", kRanks * kAdds)));
  }
}

TEST_P(PerScheme, RankThatNeverJoinsIsATimeoutNamingItsKey) {
  const Job job = Job::Make(GetParam(), 3);
  // Rank 0 (the store host for tcp/env) has the longer timeout, so rank 1
  // times out while the store is still there; rank 2 never starts.
  auto rank0 = job.StartWorker(0, "exchange", 4000);
  auto rank1 = job.StartWorker(1, "exchange", 1500);
  for (auto* process : {rank0.get(), rank1.get()}) {
    const ProcessResult result = process->Wait(absl::Seconds(30));
    SCOPED_TRACE(result.output);
    EXPECT_FALSE(result.timed_out);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_TRUE(absl::StrContains(result.output, "ERROR DEADLINE_EXCEEDED"));
    EXPECT_TRUE(absl::StrContains(result.output, "worker/2"));
    // 1.5 s / 4 s timeouts (plus linger for rank 0): well under the bound.
    EXPECT_LT(result.elapsed, absl::Seconds(15));
  }
}

INSTANTIATE_TEST_SUITE_P(Schemes, PerScheme, ::testing::Values("tcp", "env", "file"),
                         [](const auto& info) { return info.param; });

TEST(TcpFaults, ServerKilledMidRendezvousIsUnavailableNotAHang) {
  const Job job = Job::Make("tcp", 3);
  auto rank0 = job.StartWorker(0, "hold", 60000);
  ASSERT_TRUE(rank0->WaitForOutput("READY", absl::Seconds(20)));
  auto rank1 = job.StartWorker(1, "exchange", 60000);  // waits for rank 2, forever
  ASSERT_TRUE(rank1->WaitForOutput("resolved", absl::Seconds(20)));
  absl::SleepFor(absl::Milliseconds(300));  // rank 1 is parked in get()
  rank0->Kill(SIGKILL);
  const ProcessResult result = rank1->Wait(absl::Seconds(30));
  SCOPED_TRACE(result.output);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(result.output, "ERROR UNAVAILABLE"));
  EXPECT_TRUE(absl::StrContains(result.output, absl::StrCat("127.0.0.1:", job.port)));
  EXPECT_LT(result.elapsed, absl::Seconds(20));  // the timeout was 60 s
}

TEST(TcpFaults, WrongTokenIsRefusedAcrossProcesses) {
  const Job job = Job::Make("tcp", 2);
  auto rank0 = job.StartWorker(0, "exchange", 2000, {"--token=right"});
  auto rank1 = job.StartWorker(1, "exchange", 10000, {"--token=wrong"});
  const ProcessResult refused = rank1->Wait(absl::Seconds(30));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "ERROR UNAUTHENTICATED")) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "could not prove that it holds this rank's token"))
      << refused.output;
  EXPECT_LT(refused.elapsed, absl::Seconds(8)) << "refusal must not wait out the timeout";
  const ProcessResult host = rank0->Wait(absl::Seconds(30));
  EXPECT_TRUE(absl::StrContains(host.output, "ERROR DEADLINE_EXCEEDED")) << host.output;
}

TEST(TcpFaults, PortInUseAcrossProcesses) {
  const Job job = Job::Make("tcp", 2);
  auto first = job.StartWorker(0, "hold", 30000);
  ASSERT_TRUE(first->WaitForOutput("READY", absl::Seconds(20)));
  auto second = job.StartWorker(0, "exchange", 3000);
  const ProcessResult result = second->Wait(absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "already in use")) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, absl::StrCat("127.0.0.1:", job.port)))
      << result.output;
}

TEST(TcpFaults, ExternalStoreServerWithToken) {
  const std::string port_file = TempPath("port");
  // A link planted where the port file's temporary used to go (a shared
  // directory such as /tmp): never followed.
  const std::string victim = TempPath("victim");
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(symlink(victim.c_str(), (port_file + ".tmp").c_str()), 0);
  auto server = Process::Start({Runfile("plugins/store/dist_store_server"), "--host=127.0.0.1",
                                "--port=0", "--port_file=" + port_file},
                               {{"DIST_STORE_TOKEN", "job-secret"}});
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->WaitForOutput("listening on", absl::Seconds(20)));
  int port = 0;
  std::ifstream(port_file) >> port;
  ASSERT_GT(port, 0);
  std::string kept;
  std::getline(std::ifstream(victim), kept);
  EXPECT_EQ(kept, "precious");
  Job job = Job::Make("tcp", 3);
  job.port = port;
  job.extra_query = "&external=1";
  std::vector<std::unique_ptr<Process>> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.push_back(
        job.StartWorker(rank, "exchange", 20000, {}, {{"DIST_STORE_TOKEN", "job-secret"}}));
  }
  for (auto& rank : ranks) {
    const ProcessResult result = rank->Wait(absl::Seconds(60));
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_TRUE(absl::StrContains(result.output, "saw 3 keys")) << result.output;
  }
  // A rank without the token is refused; the server goes on.
  auto intruder = job.StartWorker(1, "exchange", 5000);
  const ProcessResult refused = intruder->Wait(absl::Seconds(30));
  EXPECT_TRUE(absl::StrContains(refused.output, "requires a token")) << refused.output;
  (*server)->Kill(SIGTERM);
  const ProcessResult stopped = (*server)->Wait(absl::Seconds(20));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_TRUE(absl::StrContains(stopped.output, "refusing client")) << stopped.output;
}

TEST(StoreServerBinary, HelpListsTheFlags) {
  auto help = Process::Start({Runfile("plugins/store/dist_store_server"), "--help"});
  ASSERT_TRUE(help.ok());
  const ProcessResult result = (*help)->Wait(absl::Seconds(20));
  EXPECT_TRUE(absl::StrContains(result.output, "--port")) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "--token")) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "--port_file")) << result.output;  // the flag list
  EXPECT_TRUE(absl::StrContains(result.output, "external=1")) << result.output;
}

TEST(StoreServerBinary, PortInUseIsOneLine) {
  const std::string port_file = TempPath("port");
  auto first = Process::Start({Runfile("plugins/store/dist_store_server"), "--host=127.0.0.1",
                               "--port=0", "--port_file=" + port_file});
  ASSERT_TRUE((*first)->WaitForOutput("listening on", absl::Seconds(20)));
  int port = 0;
  std::ifstream(port_file) >> port;
  auto second = Process::Start({Runfile("plugins/store/dist_store_server"), "--host=127.0.0.1",
                                absl::StrCat("--port=", port)});
  const ProcessResult result = (*second)->Wait(absl::Seconds(20));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "already in use")) << result.output;
}

// A job killed after rank 0 joined leaves its file behind.
std::string LeaveStaleFile(int world_size) {
  const Job job = Job::Make("file", world_size);
  auto rank0 = job.StartWorker(0, "hold", 60000);
  EXPECT_TRUE(rank0->WaitForOutput("READY", absl::Seconds(20)));
  rank0->Kill(SIGKILL);
  rank0->Wait(absl::Seconds(10));
  return job.file;
}

TEST(FileFaults, StaleFileFromACrashedJobIsReportedNotJoined) {
  const std::string stale = LeaveStaleFile(2);
  Job rerun = Job::Make("file", 2);
  rerun.file = stale;
  // Same rank again: the file already has rank 0's join record, from a
  // process of this host that no longer runs.
  const ProcessResult same_rank = rerun.StartWorker(0, "exchange", 5000)->Wait(absl::Seconds(30));
  EXPECT_EQ(same_rank.exit_code, 1) << same_rank.output;
  EXPECT_TRUE(absl::StrContains(same_rank.output, "ERROR FAILED_PRECONDITION")) << same_rank.output;
  EXPECT_TRUE(absl::StrContains(same_rank.output, "is stale")) << same_rank.output;
  EXPECT_TRUE(absl::StrContains(same_rank.output, "rank 0 already joined")) << same_rank.output;
  EXPECT_TRUE(absl::StrContains(same_rank.output, "no longer running")) << same_rank.output;
  EXPECT_TRUE(absl::StrContains(same_rank.output, "delete the file")) << same_rank.output;
  EXPECT_LT(same_rank.elapsed, absl::Seconds(4)) << "reported at once, not at the timeout";
  // Another rank, even of another world size: everyone who joined is gone.
  Job bigger = Job::Make("file", 3);
  bigger.file = stale;
  const ProcessResult other = bigger.StartWorker(1, "exchange", 5000)->Wait(absl::Seconds(30));
  EXPECT_EQ(other.exit_code, 1) << other.output;
  EXPECT_TRUE(absl::StrContains(other.output, "every process that joined it")) << other.output;
  EXPECT_LT(other.elapsed, absl::Seconds(4));
}

TEST(FileFaults, RendezvousOlderThanTheTimeoutIsStale) {
  // Rank 0 is alive but its rendezvous began before this rank's timeout:
  // rank 1 is refused instead of joining a rendezvous that is over.
  const Job job = Job::Make("file", 3);
  auto rank0 = job.StartWorker(0, "hold", 60000);
  ASSERT_TRUE(rank0->WaitForOutput("READY", absl::Seconds(20)));
  absl::SleepFor(absl::Milliseconds(1500));
  const ProcessResult late = job.StartWorker(1, "exchange", 1000)->Wait(absl::Seconds(30));
  EXPECT_EQ(late.exit_code, 1) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "left over from a crashed job")) << late.output;
  EXPECT_TRUE(absl::StrContains(late.output, "only 1 of 3 ranks joined")) << late.output;
}

TEST(FileFaults, GarbageFileIsNotMistakenForAStore) {
  const std::string path = TempPath("garbage");
  const std::string text = "this is not a rendezvous file\n";
  std::ofstream(path) << text;
  Job job = Job::Make("file", 1);
  job.file = path;
  const ProcessResult result = job.StartWorker(0, "exchange", 3000)->Wait(absl::Seconds(30));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, path)) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "ERROR FAILED_PRECONDITION")) << result.output;
  EXPECT_TRUE(absl::StrContains(result.output, "left it untouched")) << result.output;
  std::ifstream file(path);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>()),
            text);
}

}  // namespace
}  // namespace dist::testing

// distrun's pieces: argument splitting, the rank environment, where the
// store is, line prefixing and exit descriptions.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/distrun/command_line.h"
#include "tools/distrun/exit_description.h"
#include "tools/distrun/hosted_store.h"
#include "tools/distrun/job.h"
#include "tools/distrun/line_prefixer.h"

namespace dist::distrun {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsSubsetOf;
using ::testing::Not;

bool TakesValue(absl::string_view name) { return name != "prefix"; }

TEST(SplitArgsTest, StopsAtTheProgram) {
  SplitCommandLine s =
      SplitArgs({"distrun", "-n", "4", "--node-rank=1", "--prefix", "prog", "-n", "x"}, TakesValue);
  EXPECT_THAT(s.own, ElementsAre("distrun", "--nproc_per_node", "4", "--node_rank=1", "--prefix"));
  EXPECT_THAT(s.program, ElementsAre("prog", "-n", "x"));
}

TEST(SplitArgsTest, DoubleDashEndsFlags) {
  SplitCommandLine s = SplitArgs({"distrun", "--nproc-per-node", "2", "--", "-weird"}, TakesValue);
  EXPECT_THAT(s.own, ElementsAre("distrun", "--nproc_per_node", "2"));
  EXPECT_THAT(s.program, ElementsAre("-weird"));
}

TEST(SplitArgsTest, NoProgram) {
  SplitCommandLine s = SplitArgs({"distrun", "--help"}, TakesValue);
  EXPECT_THAT(s.own, ElementsAre("distrun", "--help"));
  EXPECT_TRUE(s.program.empty());
}

TEST(RankEnvironmentTest, ReplacesOnlyItsOwnKeys) {
  Job job;
  job.argv = {"x"};
  job.nproc_per_node = 2;
  job.nnodes = 3;
  job.node_rank = 2;
  job.master_addr = "host0";
  job.master_port = 4242;
  job.backend = "gloo";
  std::vector<std::string> env =
      RankEnvironment(job, 1, {"PATH=/bin", "RANK=99", "RANKING=keep", "DIST_BACKEND=mpi"});
  EXPECT_THAT(env, Contains("PATH=/bin"));
  EXPECT_THAT(env, Contains("RANKING=keep"));
  EXPECT_THAT(env, Not(Contains("RANK=99")));
  EXPECT_THAT(env, Not(Contains("DIST_BACKEND=mpi")));
  EXPECT_THAT(
      (std::vector<std::string>{"RANK=5", "WORLD_SIZE=6", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
                                "MASTER_ADDR=host0", "MASTER_PORT=4242", "DIST_INIT_METHOD=env://",
                                "DIST_BACKEND=gloo"}),
      IsSubsetOf(env));
}

TEST(ValidateJobTest, NamesTheBadFlag) {
  Job job;
  job.argv = {"x"};
  EXPECT_TRUE(ValidateJob(job).ok());
  job.nproc_per_node = 0;
  EXPECT_THAT(std::string(ValidateJob(job).message()),
              ::testing::HasSubstr("--nproc_per_node is 0"));
  job.nproc_per_node = 1;
  job.nnodes = 2;
  EXPECT_THAT(std::string(ValidateJob(job).message()), ::testing::HasSubstr("--master_port"));
}

TEST(MasterAddrWarningTest, OnlyForLoopbackWithSeveralNodes) {
  Job job;
  job.argv = {"x"};
  EXPECT_EQ(MasterAddrWarning(job), std::nullopt);  // one node, 127.0.0.1
  job.nnodes = 2;
  job.master_port = 29500;
  ASSERT_TRUE(ValidateJob(job).ok());  // one machine may play both nodes
  EXPECT_THAT(MasterAddrWarning(job).value_or(""),
              ::testing::HasSubstr("--master_addr is 127.0.0.1, a loopback address"));
  job.master_addr = "localhost";
  EXPECT_NE(MasterAddrWarning(job), std::nullopt);
  job.master_addr = "node0";
  EXPECT_EQ(MasterAddrWarning(job), std::nullopt);
}

TEST(ValidateJobTest, StorePortOnlyForTheHostedStore) {
  Job job;
  job.argv = {"x"};
  job.store_port = 70000;
  EXPECT_THAT(std::string(ValidateJob(job).message()),
              ::testing::HasSubstr("--store_port is 70000"));
  job.store_port = 29511;
  EXPECT_TRUE(ValidateJob(job).ok());
  job.init_method = "tcp://node0:29500";
  EXPECT_THAT(std::string(ValidateJob(job).message()),
              ::testing::HasSubstr("--init_method=tcp://node0:29500 leaves the store to the "
                                   "ranks; drop --store_port"));
}

TEST(PlanStoreTest, HostedForEnvOnOneNodeAndOnSeveralWithAStorePort) {
  Job job;
  job.argv = {"x"};
  StorePlan plan = PlanStore(job);
  EXPECT_TRUE(plan.external);
  EXPECT_TRUE(plan.host_here);
  job.host_store = false;
  EXPECT_FALSE(PlanStore(job).external);
  job.host_store = true;
  job.init_method = "file:///shared/job";
  EXPECT_FALSE(PlanStore(job).external);
  job.init_method = "env://";
  job.nnodes = 2;
  job.master_port = 29500;
  EXPECT_FALSE(PlanStore(job).external) << "the nodes cannot agree on a free port";
  job.store_port = 29511;
  EXPECT_TRUE(PlanStore(job).host_here);
  job.node_rank = 1;
  plan = PlanStore(job);
  EXPECT_TRUE(plan.external);
  EXPECT_FALSE(plan.host_here) << "node 0's distrun hosts it";
  EXPECT_EQ(HostedStoreInitMethod(29511), "env://?external=1&master_port=29511");
}

TEST(PlanStoreTest, WarnsWhenSurviveMeetsRankZerosStore) {
  Job job;
  job.argv = {"x"};
  job.survive = true;
  EXPECT_EQ(StorePlanWarning(job), std::nullopt);
  job.nnodes = 2;
  job.master_port = 29500;
  EXPECT_THAT(StorePlanWarning(job).value_or(""), ::testing::HasSubstr("give --store_port"));
  job.store_port = 29511;
  EXPECT_EQ(StorePlanWarning(job), std::nullopt);
  job.store_port = 0;
  job.host_store = false;  // asked for
  EXPECT_EQ(StorePlanWarning(job), std::nullopt);
}

TEST(StoreLingerTest, LongOnlyForOtherNodesStillAtWork) {
  Job job;
  EXPECT_LE(StoreLinger(job, 0), absl::Seconds(2));
  job.nnodes = 2;
  EXPECT_GE(StoreLinger(job, 0), absl::Minutes(1));
  EXPECT_LE(StoreLinger(job, 1), absl::Seconds(1));
  job.survive = true;  // this node's ranks may all be lost, the others go on
  EXPECT_GE(StoreLinger(job, 137), absl::Minutes(1));
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

TEST(LinePrefixerTest, WholeLinesOnlyAndTheTailOnFlush) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  {
    LinePrefixer p("[7] ", fds[1]);
    p.Append("he");
    p.Append("llo\nwor");
    p.Append("ld\n\nlast");
    p.Flush();
    p.Flush();  // nothing left: writes nothing
  }
  close(fds[1]);
  EXPECT_EQ(ReadAll(fds[0]), "[7] hello\n[7] world\n[7] \n[7] last\n");
  close(fds[0]);
}

TEST(LinePrefixerTest, OverlongLineIsSplit) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  std::string line(LinePrefixer::kMaxLine + 10, 'a');
  {
    LinePrefixer p("[0] ", fds[1]);
    p.Append(line);
    p.Append("\n");
  }
  close(fds[1]);
  EXPECT_EQ(ReadAll(fds[0]), "[0] " + std::string(LinePrefixer::kMaxLine, 'a') + "\n[0] " +
                                 std::string(10, 'a') + "\n");
  close(fds[0]);
}

TEST(ExitDescriptionTest, CodesAndSignals) {
  EXPECT_EQ(DescribeExit(3, 0), "exited with code 3");
  EXPECT_EQ(DescribeExit(0, SIGKILL), "killed by SIGKILL (Killed)");
  EXPECT_EQ(ShellExitCode(3, 0), 3);
  EXPECT_EQ(ShellExitCode(0, SIGTERM), 143);
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
}

}  // namespace
}  // namespace dist::distrun

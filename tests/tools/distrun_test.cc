// distrun end to end: the real binary starting real ranks (/bin/sh scripts).
#include <signal.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/subprocess.h"

namespace dist::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Distrun() { return RunfilePath("tools/distrun/distrun"); }

// distrun FLAGS... /bin/sh -c SCRIPT
ProcessResult RunScript(std::vector<std::string> flags, const std::string& script,
                        absl::Duration timeout = absl::Seconds(60)) {
  std::vector<std::string> argv = {Distrun()};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"/bin/sh", "-c", script});
  return Subprocess::Run(argv, {}, timeout);
}

// Parses lines "[R] KEY=VALUE KEY=VALUE ..." into rank -> key -> value.
std::map<int, std::map<std::string, std::string>> ParseEnvLines(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> ranks;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    int rank = -1;
    EXPECT_TRUE(absl::SimpleAtoi(absl::string_view(words[0]).substr(1, words[0].size() - 2), &rank))
        << line;
    for (size_t i = 1; i < words.size(); ++i) {
      std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
      ranks[rank][kv[0]] = kv.size() > 1 ? kv[1] : "";
    }
  }
  return ranks;
}

constexpr char kPrintEnv[] =
    "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
    "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE MASTER_ADDR=$MASTER_ADDR "
    "MASTER_PORT=$MASTER_PORT DIST_INIT_METHOD=$DIST_INIT_METHOD "
    "DIST_BACKEND=$DIST_BACKEND";

TEST(DistrunTest, SetsTheEnvironmentOfEveryRank) {
  ProcessResult r = RunScript({"-n", "4", "--backend", "gloo"}, kPrintEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ranks = ParseEnvLines(r.out);
  ASSERT_EQ(ranks.size(), 4u) << r.out;
  std::string port = ranks[0]["MASTER_PORT"];
  int port_number = 0;
  ASSERT_TRUE(absl::SimpleAtoi(port, &port_number)) << r.out;
  EXPECT_GT(port_number, 0);
  EXPECT_LT(port_number, 65536);
  for (int rank = 0; rank < 4; ++rank) {
    auto& env = ranks[rank];
    EXPECT_EQ(env["RANK"], absl::StrCat(rank));
    EXPECT_EQ(env["LOCAL_RANK"], absl::StrCat(rank));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], port) << "every rank gets the same port";
    // The store distrun hosts (distrun_store_test has the rest).
    EXPECT_EQ(env["DIST_INIT_METHOD"], ranks[0]["DIST_INIT_METHOD"]);
    EXPECT_TRUE(absl::StartsWith(env["DIST_INIT_METHOD"], "env://?external=1&master_port="))
        << env["DIST_INIT_METHOD"];
    EXPECT_EQ(env["DIST_BACKEND"], "gloo");
  }
}

TEST(DistrunTest, WithoutBackendLeavesDistBackendAlone) {
  Subprocess p({Distrun(), "-n", "1", "/bin/sh", "-c", kPrintEnv}, {"DIST_BACKEND=mpi"});
  p.Start();
  ProcessResult r = p.Wait(absl::Seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnvLines(r.out)[0]["DIST_BACKEND"], "mpi");
}

TEST(DistrunTest, SecondNodeOfTwoGetsGlobalRanks) {
  ProcessResult r = RunScript({"--nnodes=2", "--node-rank", "1", "-n", "3", "--master-addr",
                               "10.1.2.3", "--master_port", "29555"},
                              kPrintEnv);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ranks = ParseEnvLines(r.out);
  ASSERT_EQ(ranks.size(), 3u) << r.out;
  for (int local = 0; local < 3; ++local) {
    int rank = 3 + local;
    auto& env = ranks[rank];
    EXPECT_EQ(env["RANK"], absl::StrCat(rank)) << r.out;
    EXPECT_EQ(env["LOCAL_RANK"], absl::StrCat(local));
    EXPECT_EQ(env["WORLD_SIZE"], "6");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["MASTER_ADDR"], "10.1.2.3");
    EXPECT_EQ(env["MASTER_PORT"], "29555");
  }
}

// The store is authenticated by default: every rank of one job gets the
// same random secret, a new one per job, unless DIST_STORE_TOKEN is set.
TEST(DistrunTest, GivesEveryRankOneRandomStoreTokenPerJob) {
  const char* script = "echo TOKEN=$DIST_STORE_TOKEN";
  std::vector<std::string> without = {"DIST_STORE_TOKEN="};
  std::vector<std::string> flags = {"-n", "3"};
  auto run = [&](std::vector<std::string> env) {
    std::vector<std::string> argv = {Distrun()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"/bin/sh", "-c", script});
    return Subprocess::Run(argv, env);
  };
  ProcessResult first = run(without);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto ranks = ParseEnvLines(first.out);
  ASSERT_EQ(ranks.size(), 3u) << first.out;
  const std::string token = ranks[0]["TOKEN"];
  EXPECT_EQ(token.size(), 64u) << "32 random bytes in hex: " << first.out;
  for (int rank = 1; rank < 3; ++rank) EXPECT_EQ(ranks[rank]["TOKEN"], token);
  ProcessResult second = run(without);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(ParseEnvLines(second.out)[0]["TOKEN"], token) << "one secret per job";
  ProcessResult given = run({"DIST_STORE_TOKEN=mine"});
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_EQ(ParseEnvLines(given.out)[2]["TOKEN"], "mine");
}

TEST(DistrunTest, SeveralNodesWithoutATokenAreWarned) {
  ProcessResult r =
      Subprocess::Run({Distrun(), "--nnodes=2", "--node_rank=1", "--master_port=29555", "-n", "1",
                       "/bin/sh", "-c", "echo TOKEN=$DIST_STORE_TOKEN"},
                      {"DIST_STORE_TOKEN="});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("DIST_STORE_TOKEN is not set"));
  EXPECT_THAT(r.out, HasSubstr("TOKEN=\n"));
}

TEST(DistrunTest, SeveralNodesNeedAMasterPort) {
  ProcessResult r = RunScript({"--nnodes=2", "-n", "1"}, "true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--master_port"));
  r = RunScript({"--nnodes=2", "--node_rank=2", "--master_port=1234"}, "true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--node_rank is 2"));
}

TEST(DistrunTest, PrefixesEveryLineWithoutInterleaving) {
  // Each rank writes one line in two pieces 0.2 s apart (while the others
  // write), then 300 long lines to stdout and 100 to stderr as fast as it
  // can, and a last line without a newline.
  const std::string payload(400, 'x');
  ProcessResult r =
      RunScript({"-n", "4"}, absl::StrCat("printf split-; sleep 0.2; echo line-$RANK; i=0; while [ "
                                          "$i -lt 300 ]; do echo \"rank=$RANK i=$i ",
                                          payload,
                                          " end\"; if [ $((i % 3)) = 0 ]; then echo "
                                          "\"err rank=$RANK i=$i\" >&2; fi; i=$((i+1)); done; "
                                          "printf tail-of-$RANK"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, int> next;  // per rank, lines arrive in order
  int tails = 0, splits = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    ASSERT_EQ(line[0], '[') << line;
    int rank = line[1] - '0';
    ASSERT_TRUE(rank >= 0 && rank < 4) << line;
    std::string prefix = absl::StrCat("[", rank, "] ");
    ASSERT_TRUE(absl::StartsWith(line, prefix)) << line;
    absl::string_view body = line.substr(prefix.size());
    if (absl::StartsWith(body, "split-")) {
      EXPECT_EQ(body, absl::StrCat("split-line-", rank));
      ++splits;
      continue;
    }
    if (absl::StartsWith(body, "tail-of-")) {
      EXPECT_EQ(body, absl::StrCat("tail-of-", rank));
      ++tails;
      continue;
    }
    EXPECT_EQ(body, absl::StrCat("rank=", rank, " i=", next[rank]++, " ", payload, " end"));
  }
  for (int rank = 0; rank < 4; ++rank) EXPECT_EQ(next[rank], 300) << rank;
  EXPECT_EQ(tails, 4);
  EXPECT_EQ(splits, 4);
  int err_lines = 0;
  for (absl::string_view line : absl::StrSplit(r.err, '\n', absl::SkipEmpty())) {
    int rank = line[1] - '0';
    EXPECT_TRUE(absl::StartsWith(line, absl::StrCat("[", rank, "] err rank=", rank, " i=")))
        << line;
    ++err_lines;
  }
  EXPECT_EQ(err_lines, 4 * 100);
}

TEST(DistrunTest, NoPrefixFlag) {
  ProcessResult r = RunScript({"-n", "2", "--noprefix"}, "echo hello");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\nhello\n");
}

TEST(DistrunTest, RankExitingWithThreeStopsTheOthers) {
  ProcessResult r = RunScript({"-n", "3", "--grace=1s"},
                              "if [ $RANK = 1 ]; then sleep 0.3; echo bye; exit 3; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.elapsed, absl::Seconds(15));
  EXPECT_THAT(r.out, HasSubstr("[1] bye"));
  EXPECT_THAT(r.err, HasSubstr("rank 1 failed first: exited with code 3"));
  EXPECT_THAT(r.err, HasSubstr("rank 1: exited with code 3"));
  EXPECT_THAT(r.err, HasSubstr("rank 0: killed by SIGTERM"));
  EXPECT_THAT(r.err, HasSubstr("rank 2: killed by SIGTERM"));
}

TEST(DistrunTest, RankKilledBySignal) {
  ProcessResult r = RunScript({"-n", "2", "--grace=1s"},
                              "if [ $RANK = 0 ]; then sleep 0.2; kill -SEGV $$; fi; sleep 60");
  EXPECT_EQ(r.exit_code, 128 + SIGSEGV) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 0 failed first: killed by SIGSEGV"));
  EXPECT_THAT(r.err, HasSubstr("rank 1: killed by SIGTERM"));
}

TEST(DistrunTest, HangingRankIsKilledAfterTheGracePeriods) {
  // Rank 1 ignores SIGTERM: only SIGKILL, 2 x grace after rank 0 failed,
  // ends it.
  ProcessResult r = RunScript({"-n", "2", "--grace=1s"},
                              "if [ $RANK = 0 ]; then sleep 0.2; exit 1; fi; trap '' TERM; "
                              "while true; do sleep 0.1; done");
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_GE(r.elapsed, absl::Seconds(2));
  EXPECT_LT(r.elapsed, absl::Seconds(15));
  EXPECT_THAT(r.err, HasSubstr("sent SIGTERM to rank 1"));
  EXPECT_THAT(r.err, HasSubstr("sent SIGKILL to rank 1"));
  EXPECT_THAT(r.err, HasSubstr("rank 1: killed by SIGKILL"));
}

TEST(DistrunTest, JobTimeout) {
  ProcessResult r = RunScript({"-n", "2", "--timeout=1s", "--grace=1s"}, "sleep 60");
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_LT(r.elapsed, absl::Seconds(15));
  EXPECT_THAT(r.err, HasSubstr("timed out after 1s"));
}

TEST(DistrunTest, ForwardsSigintToTheRanks) {
  Subprocess p({Distrun(), "-n", "2", "/bin/sh", "-c",
                "trap 'echo got INT; exit 5' INT; echo ready; "
                "while true; do sleep 0.1; done"});
  p.Start();
  ASSERT_TRUE(p.WaitForOutput("[0] ready", absl::Seconds(30)));
  ASSERT_TRUE(p.WaitForOutput("[1] ready", absl::Seconds(30)));
  p.Signal(SIGINT);
  ProcessResult r = p.Wait(absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0] got INT"));
  EXPECT_THAT(r.out, HasSubstr("[1] got INT"));
  EXPECT_THAT(r.err, HasSubstr("received SIGINT"));
}

TEST(DistrunTest, ForwardsSigtermAndReportsIt) {
  Subprocess p(
      {Distrun(), "-n", "2", "/bin/sh", "-c", "echo ready; while true; do sleep 0.1; done"});
  p.Start();
  ASSERT_TRUE(p.WaitForOutput("[1] ready", absl::Seconds(30)));
  ASSERT_TRUE(p.WaitForOutput("[0] ready", absl::Seconds(30)));
  p.Signal(SIGTERM);
  ProcessResult r = p.Wait(absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 0: killed by SIGTERM"));
  EXPECT_THAT(r.err, HasSubstr("rank 1: killed by SIGTERM"));
}

// Out of descriptors while starting ranks: the message names the limit,
// not the program.
TEST(DistrunTest, RunningOutOfDescriptorsNamesTheLimit) {
  ProcessResult r = Subprocess::Run(
      {"/bin/sh", "-c", absl::StrCat("ulimit -n 24; exec ", Distrun(), " -n 8 /bin/true")});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("too many open files (EMFILE); raise the open-files limit"));
}

TEST(DistrunTest, MissingProgram) {
  ProcessResult r = Subprocess::Run({Distrun(), "-n", "2", "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("cannot start rank 0 ('/nonexistent/program')"));
}

TEST(DistrunTest, ProgramFlagsAreNotDistrunsFlags) {
  // --grace after the program belongs to the program.
  ProcessResult r = Subprocess::Run({Distrun(), "-n", "1", "/bin/echo", "--grace", "-n", "x"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] --grace -n x\n");
}

TEST(DistrunTest, ProgramHelpIsTheProgramsOwn) {
  // distrun answers --help only among its own flags, before PROGRAM.
  ProcessResult r = Subprocess::Run({Distrun(), "-n", "1", "/bin/echo", "--help", "-h"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[0] --help -h\n");
}

// distrun's environment is what the real core's env:// rendezvous needs.
TEST(DistrunTest, StartsARealDistJob) {
  for (const char* backend : {"gloo", "shm"}) {
    ProcessResult r = Subprocess::Run(
        {Distrun(), "-n", "3", "--backend", backend, RunfilePath("tests/tools/allreduce_program")},
        {"DIST_TIMEOUT=30s", "DIST_PLUGIN_PATH=", "DIST_CONFIG="});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (int rank = 0; rank < 3; ++rank) {
      // 1 + 2 + 3, computed by the ranks through the backend.
      EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank, "] rank ", rank, " of 3 backend ",
                                                backend, " sum 6\n")));
    }
  }
}

// Rank 1 of a real job exits 3 before the all-reduce: the others fail
// (the core names the lost rank) or are stopped, and distrun exits 3.
TEST(DistrunTest, RealJobWithADyingRank) {
  ProcessResult r = Subprocess::Run({Distrun(), "-n", "3", "--backend", "gloo", "--grace=2s",
                                     RunfilePath("tests/tools/allreduce_program"), "1"},
                                    {"DIST_TIMEOUT=10s", "DIST_PLUGIN_PATH=", "DIST_CONFIG="});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_LT(r.elapsed, absl::Seconds(30));
  EXPECT_THAT(r.out, HasSubstr("[1] rank 1 exits early"));
  EXPECT_THAT(r.err, HasSubstr("rank 1 failed first: exited with code 3"));
  EXPECT_THAT(r.out, Not(HasSubstr("sum")));
}

TEST(DistrunTest, HelpListsTheFlags) {
  ProcessResult r = Subprocess::Run({Distrun(), "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // Debian's Abseil alone would exit 1
  EXPECT_THAT(r.out, HasSubstr("--nproc_per_node"));
  EXPECT_THAT(r.out, HasSubstr("--grace"));
  EXPECT_THAT(r.out, Not(HasSubstr("--flagfile")));
}

TEST(DistrunTest, NoProgramIsAUsageError) {
  ProcessResult r = Subprocess::Run({Distrun(), "-n", "2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("no program given"));
}

}  // namespace
}  // namespace dist::testing

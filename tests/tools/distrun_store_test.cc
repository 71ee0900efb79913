// The store distrun hosts for its ranks (tools/distrun/hosted_store.h), with
// the real binary and real ranks: what the ranks are told, that the store
// outlives rank 0 so that the survivors of its SIGKILL shrink and compute
// right (gloo, shm; one node and two), and the errors a user gets.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
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
std::string Survivor() { return RunfilePath("tests/tools/survivor_program"); }

// The ranks' environment: no plugin path or config of the machine's, and a
// timeout that bounds a hung test well below bazel's.
const std::vector<std::string> kEnv = {
    "DIST_TIMEOUT=20s", "DIST_PLUGIN_PATH=", "DIST_CONFIG=", "DIST_SURVIVAL=", "DIST_INIT_METHOD="};

// rank -> the line "[R] WORD=VALUE" the rank printed, as WORD -> VALUE.
std::map<int, std::map<std::string, std::string>> Words(const std::string& out) {
  std::map<int, std::map<std::string, std::string>> ranks;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    int rank = -1;
    if (!absl::SimpleAtoi(absl::string_view(words[0]).substr(1, words[0].size() - 2), &rank)) {
      continue;
    }
    for (size_t i = 1; i < words.size(); ++i) {
      std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
      ranks[rank][kv[0]] = kv.size() > 1 ? kv[1] : "";
    }
  }
  return ranks;
}

// A port nobody listens on, by binding port 0 (the kernel's pick).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return -1;
  }
  close(fd);
  return ntohs(address.sin_port);
}

// What survivor_program prints on old rank `rank` when `survivors` (old
// ranks, ascending) went on: its new rank, and the sum of the survivors'
// old rank + 1, computed here.
std::string SurvivorLine(int rank, const std::vector<int>& survivors) {
  int sum = 0, me = 0;
  for (size_t i = 0; i < survivors.size(); ++i) {
    sum += survivors[i] + 1;
    if (survivors[i] == rank) me = static_cast<int>(i);
  }
  return absl::StrCat("[", rank, "] rank ", rank, ": rank ", me, " of ", survivors.size(),
                      " after the shrink, sum ", sum, "\n");
}

TEST(DistrunStoreTest, RanksAreToldOfTheStoreDistrunHosts) {
  const char* script = "echo INIT=$DIST_INIT_METHOD PORT=$MASTER_PORT";
  ProcessResult r = Subprocess::Run({Distrun(), "-n", "3", "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ranks = Words(r.out);
  ASSERT_EQ(ranks.size(), 3u) << r.out;
  const std::string init = ranks[0]["INIT"];
  ASSERT_TRUE(absl::StartsWith(init, "env://?external=1&master_port=")) << init;
  int store_port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(init.substr(init.rfind('=') + 1), &store_port)) << init;
  // MASTER_PORT stays free for programs that host their own store there.
  EXPECT_NE(absl::StrCat(store_port), ranks[0]["PORT"]);
  for (int rank = 1; rank < 3; ++rank) EXPECT_EQ(ranks[rank]["INIT"], init);

  r = Subprocess::Run({Distrun(), "-n", "2", "--host_store=false", "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Words(r.out)[1]["INIT"], "env://");
  r = Subprocess::Run(
      {Distrun(), "-n", "2", "--init_method=file:///tmp/job", "/bin/sh", "-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Words(r.out)[0]["INIT"], "file:///tmp/job");
}

// The store's server raises distrun's open-files limit for its clients;
// the ranks still start with the limit distrun was given.
TEST(DistrunStoreTest, RanksKeepTheOpenFilesLimitDistrunWasGiven) {
  ProcessResult r = Subprocess::Run(
      {"/bin/sh", "-c",
       absl::StrCat("ulimit -Sn 512 && exec ", Distrun(), " -n 2 /bin/sh -c 'ulimit -Sn'")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[0] 512\n"));
  EXPECT_THAT(r.out, HasSubstr("[1] 512\n"));
}

// The point of it all: rank 0 is SIGKILLed mid-job, the store lives on in
// distrun, and the three survivors shrink and all-reduce right.
TEST(DistrunStoreTest, SurvivorsOfRankZeroShrinkAndComputeRight) {
  for (const char* backend : {"gloo", "shm"}) {
    ProcessResult r = Subprocess::Run(
        {Distrun(), "--survive", "-n", "4", "--backend", backend, Survivor(), "0"}, kEnv);
    ASSERT_EQ(r.exit_code, 0) << backend << "\n" << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("[0] rank 0: SIGKILL\n"));
    for (int rank : {1, 2, 3}) {
      EXPECT_THAT(r.out, HasSubstr(SurvivorLine(rank, {1, 2, 3}))) << backend;
    }
    EXPECT_THAT(r.err, HasSubstr("the job survived the loss of rank 0 (--survive)"));
    // Every survivor reports its revoked group as it exits: not a failure.
    EXPECT_THAT(r.err, Not(HasSubstr("store:"))) << backend;
  }
}

// --max_restarts: the killed rank is started again as a joining process;
// the survivors shrink, then grow back and admit it, and all four
// all-reduce right in the grown group (rank 0 too: the store is distrun's).
TEST(DistrunStoreTest, ARestartedRankJoinsTheSurvivorsGrownGroup) {
  for (const char* backend : {"gloo", "shm"}) {
    for (int victim : {2, 0}) {
      ProcessResult r = Subprocess::Run({Distrun(), "--max-restarts=1", "-n", "4", "--backend",
                                         backend, Survivor(), absl::StrCat(victim)},
                                        kEnv);
      ASSERT_EQ(r.exit_code, 0) << backend << "\n" << r.out << r.err;
      std::vector<int> survivors;
      for (int rank = 0; rank < 4; ++rank) {
        if (rank != victim) survivors.push_back(rank);
      }
      for (size_t i = 0; i < survivors.size(); ++i) {
        const int rank = survivors[i];
        EXPECT_THAT(r.out, HasSubstr(SurvivorLine(rank, survivors))) << backend;
        EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank, "] rank ", rank, ": rank ", i,
                                                  " of 4 after the grow, sum 10\n")))
            << backend << "\n"
            << r.out;
      }
      EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", victim,
                                                "] joined: rank 3 of 4 after the "
                                                "grow, sum 10\n")))
          << backend << "\n"
          << r.out;
      EXPECT_THAT(r.err, HasSubstr(absl::StrCat("rank ", victim,
                                                " killed by SIGKILL (Killed); restarting "
                                                "it as a process that joins the running job "
                                                "(restart 1 of 1, --max_restarts)")))
          << r.err;
      EXPECT_THAT(r.err, HasSubstr("1 restarted (--max_restarts)")) << r.err;
    }
  }
}

// --host_store=false is the old way: rank 0's store dies with it, and the
// survivors' shrink says why it cannot work.
TEST(DistrunStoreTest, WithoutItRankZerosDeathEndsTheJobAndSaysWhy) {
  ProcessResult r = Subprocess::Run({Distrun(), "--survive", "--host_store=false", "--grace=1s",
                                     "-n", "3", "--backend", "gloo", Survivor(), "0"},
                                    kEnv);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("survival needs a store that outlives every rank"));
  EXPECT_THAT(r.out, Not(HasSubstr("after the shrink")));
}

// Two nodes on this machine: node 0's distrun hosts the store at
// --store_port, node 1's ranks use it, and it outlives rank 0 there too.
TEST(DistrunStoreTest, TwoNodesShareNodeZerosStoreAndSurviveRankZero) {
  const int master_port = FreePort(), store_port = FreePort();
  ASSERT_GT(master_port, 0);
  ASSERT_GT(store_port, 0);
  std::vector<std::string> env = kEnv;
  env.push_back("DIST_STORE_TOKEN=two-nodes-secret");
  std::vector<std::unique_ptr<Subprocess>> nodes;
  for (int node = 0; node < 2; ++node) {
    nodes.push_back(std::make_unique<Subprocess>(
        std::vector<std::string>{
            Distrun(), "--survive", "--nnodes=2", absl::StrCat("--node_rank=", node), "-n", "2",
            absl::StrCat("--master_port=", master_port), absl::StrCat("--store_port=", store_port),
            "--backend", "gloo", Survivor(), "0"},
        env));
    nodes.back()->Start();
  }
  ProcessResult first = nodes[0]->Wait(absl::Seconds(60));
  ProcessResult second = nodes[1]->Wait(absl::Seconds(60));
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_THAT(first.out, HasSubstr(SurvivorLine(1, {1, 2, 3})));
  EXPECT_THAT(second.out, HasSubstr(SurvivorLine(2, {1, 2, 3})));
  EXPECT_THAT(second.out, HasSubstr(SurvivorLine(3, {1, 2, 3})));
}

TEST(DistrunStoreTest, AStorePortInUseIsOneLineWithTheFix) {
  const int taken = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  ASSERT_EQ(getsockname(taken, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  ProcessResult r = Subprocess::Run(
      {Distrun(), "-n", "2", absl::StrCat("--store_port=", port), "/bin/echo", "started"});
  close(taken);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "") << "no rank starts without its store";
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("cannot host the job's store on 127.0.0.1:", port)));
  EXPECT_THAT(r.err, HasSubstr("--host_store=false"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(DistrunStoreTest, StorePortWithoutTheHostedStoreIsAUsageError) {
  ProcessResult r = Subprocess::Run(
      {Distrun(), "-n", "1", "--host_store=false", "--store_port=29511", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--host_store=false leaves the store to the ranks; drop "
                               "--store_port"));
}

}  // namespace
}  // namespace dist::testing

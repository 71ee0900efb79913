// disttrace's verdicts on hand-written dumps: the cases the process tests
// (tests/trace) cannot stage reliably, such as a rank stuck inside an
// operation while the others gave up, and a ring that lost its oldest entries.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tools/disttrace/analysis.h"

namespace dist::trace {
namespace {

struct E {
  uint64_t seq;
  std::string op, call, state;
  int64_t issued, ended;  // ended 0: still inside
  std::string error = "";
};

class DumpDir {
 public:
  explicit DumpDir(const std::string& name)
      : dir_(std::string(std::getenv("TEST_TMPDIR")) + "/" + name) {
    std::filesystem::create_directories(dir_);
  }
  void Write(int rank, int world_size, int64_t dumped, const std::vector<E>& entries) {
    nlohmann::json dump;
    dump["format"] = "dist-trace";
    dump["rank"] = rank;
    dump["dumped_us"] = dumped;
    nlohmann::json group;
    group["name"] = "default";
    group["rank"] = rank;
    group["world_size"] = world_size;
    for (const E& e : entries) {
      nlohmann::json j;
      j["seq"] = e.seq;
      j["op"] = e.op;
      j["call"] = e.call;
      j["state"] = e.state;
      j["issued_us"] = e.issued;
      j["started_us"] = e.issued + 1;
      if (e.ended != 0) j["ended_us"] = e.ended;
      if (!e.error.empty()) j["error"] = e.error;
      group["entries"].push_back(j);
    }
    dump["groups"].push_back(group);
    std::ofstream(dir_ + "/rank-" + std::to_string(rank) + ".json") << dump.dump();
  }
  Verdict Analyze() {
    absl::StatusOr<std::vector<GroupTrace>> groups = LoadDumps(dir_);
    EXPECT_TRUE(groups.ok()) << groups.status();
    EXPECT_EQ(groups->size(), 1u);
    return dist::trace::Analyze(groups->front());
  }

 private:
  std::string dir_;
};

const char kAr[] = "all_reduce(sum, 8 x float32)";

TEST(DisttraceTest, RankStuckInsideWhileOthersGaveUp) {
  DumpDir dir("stuck");
  for (int r = 0; r < 2; ++r) {
    dir.Write(r, 3, 20'000'000,
              {{1, "all_reduce", kAr, "completed", 1'000'000, 1'000'100},
               {2, "all_reduce", kAr, "timed_out", 1'000'200, 11'000'000, "timed out"}});
  }
  dir.Write(2, 3, 13'000'200,
            {{1, "all_reduce", kAr, "completed", 1'000'000, 1'000'100},
             {2, "all_reduce", kAr, "started", 1'000'199, 0}});
  const Verdict v = dir.Analyze();
  EXPECT_EQ(v.kind, "stuck");
  EXPECT_EQ(v.seq, 2u);
  EXPECT_EQ(v.message,
            "group 'default': rank 2 is stuck inside all_reduce #2 (started 12.0 s before its "
            "dump, never completed) while ranks 0,1 gave up on it");
}

TEST(DisttraceTest, AnUnwaitedOperationBeforeACompletedOneCompleted) {
  DumpDir dir("unwaited");
  for (int r = 0; r < 2; ++r) {
    // #1 was submitted asynchronously and its work destroyed unwaited.
    dir.Write(
        r, 2, 9,
        {{1, "all_reduce", kAr, "started", 1, 0}, {2, "barrier", "barrier()", "completed", 3, 4}});
  }
  EXPECT_EQ(dir.Analyze().kind, "consistent");
}

TEST(DisttraceTest, EveryRankInsideMeansTheBackendStalled) {
  DumpDir dir("stalled");
  for (int r = 0; r < 2; ++r) {
    dir.Write(r, 2, 5'000'000, {{7, "barrier", "barrier()", "started", 1'000'000, 0}});
  }
  const Verdict v = dir.Analyze();
  EXPECT_EQ(v.kind, "stuck");
  EXPECT_NE(v.message.find("every rank (ranks 0,1) is inside barrier #7 and none completed it"),
            std::string::npos)
      << v.message;
}

TEST(DisttraceTest, MismatchEvenWhenTheBackendCompletedIt) {
  DumpDir dir("silent");
  dir.Write(0, 2, 9, {{4, "all_gather", "all_gather(8 x float32)", "completed", 1, 2}});
  dir.Write(1, 2, 9, {{4, "all_gather", "all_gather(8 x int32)", "completed", 1, 2}});
  const Verdict v = dir.Analyze();
  EXPECT_EQ(v.kind, "mismatch");
  EXPECT_EQ(v.message,
            "group 'default': all_gather #4: rank 1 called all_gather(8 x int32) where rank 0 "
            "called all_gather(8 x float32)");
}

TEST(DisttraceTest, FailedEverywhereAndOverwrittenEntries) {
  DumpDir dir("failed");
  // Rank 1's ring no longer holds #1 and #2: only #3 on is compared.
  dir.Write(0, 2, 9,
            {{1, "barrier", "barrier()", "completed", 1, 2},
             {2, "broadcast", "broadcast(root 0, 8 x float32)", "completed", 3, 4},
             {3, "all_reduce", kAr, "failed", 5, 6, "connection reset by rank 1"}});
  dir.Write(1, 2, 9, {{3, "all_reduce", kAr, "failed", 5, 6, "peer closed"}});
  const Verdict v = dir.Analyze();
  EXPECT_EQ(v.kind, "failed");
  EXPECT_EQ(v.message,
            "group 'default': all_reduce #3 failed on ranks 0,1; rank 0: connection reset by "
            "rank 1");
}

TEST(DisttraceTest, NoDumpsIsAnErrorNamingTheVariable) {
  DumpDir dir("empty");
  absl::StatusOr<std::vector<GroupTrace>> groups =
      LoadDumps(std::string(std::getenv("TEST_TMPDIR")) + "/empty");
  ASSERT_FALSE(groups.ok());
  EXPECT_NE(groups.status().message().find("DIST_TRACE_DIR"), std::string::npos);
  EXPECT_FALSE(LoadDumps("/nonexistent/traces").ok());
}

}  // namespace
}  // namespace dist::trace

// The flight recorder through libdist.so's public API on a real one-rank
// group (gloo over file://): blocking and asynchronous operations end up in
// the dump with their states, dist_trace_dump (dist::ProcessGroup::TraceDump)
// writes where asked, and an abort writes into DIST_TRACE_DIR by itself.
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "dist/dist.hpp"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

dist::ProcessGroup MakeGroup(const std::string& name) {
  dist::ProcessGroup::Options options;
  options.backend = "gloo";
  options.init_method = "file://" + TempDir() + "/rdzv-" + name + "?rank=0&world_size=1";
  options.timeout = absl::Seconds(30);
  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init(options);
  EXPECT_TRUE(group.ok()) << group.status();
  return *std::move(group);
}

nlohmann::json Read(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(TraceDump, RecordsBlockingAndAsynchronousOperations) {
  setenv("DIST_TRACE_ENTRIES", "3", 1);
  setenv("DIST_DEBUG", "detail", 1);  // one rank: every check passes
  unsetenv("DIST_TRACE_DIR");
  dist::ProcessGroup group = MakeGroup("ops");
  float data[4] = {1, 2, 3, 4};
  const dist_buffer_t b = dist_make_buffer(data, 4, DIST_FLOAT32, dist_cpu());
  ASSERT_TRUE(group.AllReduce(b, b, DIST_SUM).ok());
  absl::StatusOr<dist::Work> broadcast = group.BroadcastAsync(b, b, 0);
  ASSERT_TRUE(broadcast.ok()) << broadcast.status();
  ASSERT_TRUE(broadcast->Wait().ok());
  ASSERT_TRUE(group.Barrier().ok());
  absl::StatusOr<dist::Work> reduce = group.AllReduceAsync(b, b, DIST_MAX);
  ASSERT_TRUE(reduce.ok()) << reduce.status();
  absl::StatusOr<bool> done = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (done.ok() && !*done && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
    done = reduce->Test();
  }
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(*done) << "the asynchronous all_reduce did not finish within 30 s";

  const std::string path = TempDir() + "/ops.json";
  ASSERT_TRUE(group.TraceDump(path).ok());
  const nlohmann::json dump = Read(path);
  EXPECT_EQ(dump["format"], "dist-trace");
  EXPECT_EQ(dump["rank"], 0);
  ASSERT_EQ(dump["groups"].size(), 1u);
  const nlohmann::json& g = dump["groups"][0];
  EXPECT_EQ(g["name"], "default");
  EXPECT_EQ(g["backend"], "gloo");
  EXPECT_EQ(g["recorded"], 4);
  const nlohmann::json& entries = g["entries"];
  ASSERT_EQ(entries.size(), 3u);  // the ring keeps the last 3 of 4
  EXPECT_EQ(entries[0]["seq"], 2);
  EXPECT_EQ(entries[0]["call"], "broadcast(root 0, 4 x float32)");
  EXPECT_EQ(entries[1]["call"], "barrier()");
  EXPECT_EQ(entries[2]["seq"], 4);
  EXPECT_EQ(entries[2]["call"], "all_reduce(max, 4 x float32)");
  for (const nlohmann::json& e : entries) {
    EXPECT_EQ(e["state"], "completed") << e.dump();
    EXPECT_LE(e["issued_us"].get<int64_t>(), e["started_us"].get<int64_t>());
    EXPECT_LE(e["started_us"].get<int64_t>(), e["ended_us"].get<int64_t>());
  }

  // Without a path the dump goes to DIST_TRACE_DIR, which is not set.
  absl::Status no_dir = group.TraceDump();
  EXPECT_EQ(no_dir.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(no_dir.message().find("DIST_TRACE_DIR"), std::string::npos) << no_dir;
  unsetenv("DIST_TRACE_ENTRIES");
  unsetenv("DIST_DEBUG");
}

TEST(TraceDump, AnAbortWritesIntoTheTraceDirectory) {
  const std::string dir = TempDir() + "/traces";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  setenv("DIST_TRACE_DIR", dir.c_str(), 1);
  dist::ProcessGroup group = MakeGroup("abort");
  float data[2] = {1, 2};
  const dist_buffer_t b = dist_make_buffer(data, 2, DIST_FLOAT32, dist_cpu());
  ASSERT_TRUE(group.AllReduce(b, b, DIST_SUM).ok());
  group.Abort("the test gives up");
  const nlohmann::json dump = Read(dir + "/rank-0.json");
  EXPECT_EQ(dump["reason"], "group 'default' aborted: the test gives up");
  EXPECT_EQ(dump["groups"][0]["entries"][0]["state"], "completed");
  // A later call fails at once and is recorded with its error.
  absl::Status after = group.AllReduce(b, b, DIST_SUM);
  EXPECT_FALSE(after.ok());
  const nlohmann::json again = Read(dir + "/rank-0.json");
  const nlohmann::json& last = again["groups"][0]["entries"][1];
  EXPECT_EQ(last["state"], "failed") << last.dump();
  EXPECT_NE(last["error"].get<std::string>().find("the test gives up"), std::string::npos)
      << last.dump();
  unsetenv("DIST_TRACE_DIR");
}

}  // namespace

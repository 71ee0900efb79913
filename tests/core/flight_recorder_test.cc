// The flight recorder's ring, states and JSON dump (core/flight_recorder.h),
// and the fingerprint's wire form (core/collective_check.h).
#include "core/flight_recorder.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/collective_check.h"
#include "core/trace_clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dist {
namespace {

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::string TempDir() { return std::getenv("TEST_TMPDIR"); }

OpFingerprint AllReduce(uint64_t count) {
  OpFingerprint fp;
  fp.op = DIST_COLL_ALL_REDUCE;
  fp.dtype = DIST_FLOAT32;
  fp.count = count;
  fp.reduce = DIST_SUM;
  return fp;
}

TEST(FlightRecorderTest, KeepsTheLastEntriesWithTheirStates) {
  FlightRecorder recorder("default", 7, 1, 4, "gloo", 3, "");
  uint64_t ids[5];
  for (uint64_t seq = 1; seq <= 5; ++seq) {
    ids[seq - 1] = recorder.Issue(seq, AllReduce(seq * 10));
    recorder.Start(ids[seq - 1]);
  }
  recorder.End(ids[0], absl::OkStatus());  // overwritten: ignored
  recorder.End(ids[2], absl::OkStatus());
  recorder.End(ids[3], absl::DeadlineExceededError("rank 2 did not arrive"));
  recorder.End(ids[4], absl::InternalError("boom"));
  recorder.End(ids[4], absl::OkStatus());  // only the first end counts
  const std::string path = TempDir() + "/ring.json";
  absl::StatusOr<std::string> written = recorder.Dump(path, "test");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, path);
  const nlohmann::json dump = ReadJson(path);
  EXPECT_EQ(dump["format"], "dist-trace");
  EXPECT_EQ(dump["rank"], 7);
  EXPECT_EQ(dump["reason"], "test");
  ASSERT_EQ(dump["groups"].size(), 1u);
  const nlohmann::json& group = dump["groups"][0];
  EXPECT_EQ(group["name"], "default");
  EXPECT_EQ(group["rank"], 1);
  EXPECT_EQ(group["world_size"], 4);
  EXPECT_EQ(group["recorded"], 5);
  const nlohmann::json& entries = group["entries"];
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0]["seq"], 3);
  EXPECT_EQ(entries[0]["state"], "completed");
  EXPECT_EQ(entries[0]["call"], "all_reduce(sum, 30 x float32)");
  EXPECT_EQ(entries[0]["count"], 30);
  EXPECT_TRUE(entries[0].contains("ended_us"));
  EXPECT_EQ(entries[1]["state"], "timed_out");
  EXPECT_EQ(entries[1]["error"], "rank 2 did not arrive");
  EXPECT_EQ(entries[2]["state"], "failed");
  EXPECT_EQ(entries[2]["error"], "boom");
  EXPECT_LE(entries[2]["issued_us"].get<int64_t>(), entries[2]["started_us"].get<int64_t>());
  EXPECT_LE(entries[2]["started_us"].get<int64_t>(), entries[2]["ended_us"].get<int64_t>());
}

// Timestamps are time-stamp counter readings where the counter is
// invariant (core/trace_clock.h); the dump must still give wall-clock
// microseconds, and the time between two operations.
TEST(FlightRecorderTest, DumpsWallClockTimes) {
  FlightRecorder recorder("default", 0, 0, 2, "shm", 8, "");
  const int64_t before_us = TraceClock::WallNanos() / 1000;
  const uint64_t first = recorder.Issue(1, AllReduce(1), /*started=*/true);
  absl::SleepFor(absl::Milliseconds(50));
  recorder.End(first, absl::OkStatus());
  const uint64_t second = recorder.Issue(2, AllReduce(1), /*started=*/true);
  absl::SleepFor(absl::Milliseconds(50));
  const int64_t after_us = TraceClock::WallNanos() / 1000;
  const std::string path = TempDir() + "/times.json";
  ASSERT_TRUE(recorder.Dump(path, "test").ok());
  recorder.End(second, absl::OkStatus());  // after the dump: not in it
  const nlohmann::json dump = ReadJson(path);
  const nlohmann::json& entries = dump["groups"][0]["entries"];
  ASSERT_EQ(entries.size(), 2u);
  const int64_t issued = entries[0]["issued_us"].get<int64_t>();
  const int64_t ended = entries[0]["ended_us"].get<int64_t>();
  const int64_t next = entries[1]["issued_us"].get<int64_t>();
  // 1 ms of slack for the conversion at each end.
  EXPECT_GE(issued, before_us - 1000);
  EXPECT_LE(next, after_us + 1000);
  EXPECT_EQ(entries[0]["started_us"].get<int64_t>(), issued);
  // The sleep between them, measured by the recorder's own clock.
  EXPECT_GE(ended - issued, 49000);
  EXPECT_LT(ended - issued, 49000 + (after_us - before_us));
  EXPECT_LE(ended, next);
  EXPECT_FALSE(entries[1].contains("ended_us"));
}

TEST(FlightRecorderTest, OneFilePerRankWithAllItsGroups) {
  const std::string dir = TempDir();
  FlightRecorder parent("job", 11, 0, 2, "shm", 10, dir);
  FlightRecorder child("job.1", 11, 0, 1, "shm", 10, dir);
  FlightRecorder other_rank("job", 12, 1, 2, "shm", 10, dir);
  parent.Issue(1, AllReduce(1));
  OpFingerprint send;
  send.op = DIST_COLL_SEND;
  send.count = 4;
  send.dtype = DIST_INT32;
  send.peer = 1;
  send.tag = 9;
  child.Start(child.Issue(1, send));
  parent.DumpAfterFailure("because");
  const nlohmann::json dump = ReadJson(dir + "/rank-11.json");
  EXPECT_EQ(dump["reason"], "because");
  ASSERT_EQ(dump["groups"].size(), 2u);
  const nlohmann::json& entry = dump["groups"][1]["entries"][0];
  EXPECT_EQ(entry["call"], "send(to 1, tag 9, 4 x int32)");
  EXPECT_EQ(entry["peer"], 1);
  EXPECT_EQ(entry["state"], "started");
  EXPECT_FALSE(entry.contains("ended_us"));
}

TEST(FlightRecorderTest, OffWhenCapacityIsZero) {
  FlightRecorder recorder("off", 21, 0, 1, "gloo", 0, TempDir());
  EXPECT_FALSE(recorder.enabled());
  EXPECT_EQ(recorder.Issue(1, AllReduce(1)), 0u);
  recorder.DumpAfterFailure("nothing to write");
  EXPECT_FALSE(std::ifstream(TempDir() + "/rank-21.json").good());
}

TEST(FlightRecorderTest, DumpNeedsAPathOrADirectory) {
  FlightRecorder recorder("default", 31, 0, 1, "gloo", 4, "");
  absl::StatusOr<std::string> written = recorder.Dump("", "on demand");
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(written.status().message().find("DIST_TRACE_DIR"), std::string::npos);
  written = recorder.Dump("/nonexistent/dir/x.json", "on demand");
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("/nonexistent/dir/x.json"), std::string::npos);
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// DIST_TRACE_DIR may be a shared directory (/tmp): the dump is written
// through a new file of its own, so a link another user planted under the
// temporary's old, predictable name (<dump>.tmp.<pid>) is not followed; and
// it replaces an earlier dump, never a file of someone else's.
TEST(FlightRecorderTest, DumpsNeitherFollowPlantedLinksNorReplaceOthersFiles) {
  const std::string dir = TempDir() + "/shared";
  std::filesystem::create_directories(dir);
  const std::string victim = TempDir() + "/victim.txt";
  std::ofstream(victim) << "precious\n";
  const std::string dump = dir + "/rank-41.json";
  const std::string planted = absl::StrCat(dump, ".tmp.", getpid());
  std::filesystem::create_symlink(victim, planted);
  FlightRecorder recorder("default", 41, 0, 1, "gloo", 4, dir);
  absl::StatusOr<std::string> written = recorder.Dump("", "first");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(Contents(victim), "precious\n");
  EXPECT_EQ(ReadJson(dump)["reason"], "first");
  // An earlier dump is replaced.
  written = recorder.Dump("", "second");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(ReadJson(dump)["reason"], "second");
  // Someone's file, or a link, where a dump would go is left alone.
  const std::string theirs = TempDir() + "/theirs.json";
  std::ofstream(theirs) << "{\"not\": \"a dump\"}\n";
  written = recorder.Dump(theirs, "third");
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(written.status().message().find("dist did not write it"), std::string::npos)
      << written.status();
  EXPECT_EQ(Contents(theirs), "{\"not\": \"a dump\"}\n");
  const std::string link = TempDir() + "/link.json";
  std::filesystem::create_symlink(victim, link);
  written = recorder.Dump(link, "fourth");
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("not a regular file"), std::string::npos)
      << written.status();
  EXPECT_EQ(Contents(victim), "precious\n");
  // No temporary left beside them.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_TRUE(entry.path() == dump || entry.path() == planted) << entry.path();
  }
}

TEST(FingerprintTest, RoundTripsAndDescribes) {
  OpFingerprint fp;
  fp.op = DIST_COLL_BROADCAST;
  fp.dtype = DIST_FLOAT32;
  fp.count = 2048;
  fp.root = 0;
  OpFingerprint back;
  ASSERT_TRUE(DecodeFingerprint(EncodeFingerprint(fp), &back));
  EXPECT_EQ(DescribeOp(back), "broadcast(root 0, 2048 x float32)");
  EXPECT_EQ(EncodeFingerprint(back), EncodeFingerprint(fp));
  OpFingerprint barrier;
  EXPECT_EQ(DescribeOp(barrier), "barrier()");
  OpFingerprint reduce = AllReduce(5);
  reduce.op = DIST_COLL_REDUCE;
  reduce.root = 3;
  reduce.device = DIST_DEVICE_CUDA;
  EXPECT_EQ(DescribeOp(reduce), "reduce(sum, root 3, 5 x float32, cuda)");
  EXPECT_FALSE(DecodeFingerprint("1|99|0|0|0|0|0|0|0", &back));
  EXPECT_FALSE(DecodeFingerprint("garbage", &back));
}

}  // namespace
}  // namespace dist

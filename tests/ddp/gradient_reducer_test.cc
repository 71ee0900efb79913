// GradientReducer on a real one-rank group (gloo over file://): bucketing,
// copies in and out, and the errors a user gets.
#include "dist/gradient_reducer.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

dist::ProcessGroup MakeGroup() {
  dist::InitOptions options;
  options.backend = "gloo";
  options.init_method = std::string("file://") + std::getenv("TEST_TMPDIR") + "/rdzv-" +
                        std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                        "?rank=0&world_size=1";
  options.timeout = absl::Seconds(30);
  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init(options);
  EXPECT_TRUE(group.ok()) << group.status();
  return *std::move(group);
}

TEST(GradientReducer, BucketsInReverseOrderWithASmallFirstBucket) {
  dist::ProcessGroup group = MakeGroup();
  dist::GradientReducer::Options options;
  options.first_bucket_bytes = 1024;  // 256 floats
  options.bucket_bytes = 4096;        // 1024 floats
  dist::GradientReducer reducer(group, options);
  // Registered in forward order; a backward pass produces them in reverse.
  ASSERT_TRUE(reducer.AddBucketedGradient("a", 600, DIST_FLOAT32).ok());
  ASSERT_TRUE(reducer.AddBucketedGradient("b", 500, DIST_FLOAT32).ok());
  ASSERT_TRUE(reducer.AddBucketedGradient("c", 200, DIST_FLOAT32).ok());
  ASSERT_TRUE(reducer.AddBucketedGradient("d", 100, DIST_FLOAT32).ok());
  ASSERT_TRUE(reducer.Finalize().ok());
  // d (400 B) fills the 1 KiB first bucket alone (c's 800 B would overflow
  // it); c + b (2800 B) share a 4 KiB bucket; a (2400 B) would overflow it.
  const std::vector<std::vector<std::string>> expected = {{"d"}, {"c", "b"}, {"a"}};
  EXPECT_EQ(reducer.BucketLayout(), expected);
}

TEST(GradientReducer, AveragesAndCopiesBackExternalBuffers) {
  dist::ProcessGroup group = MakeGroup();
  dist::GradientReducer reducer(group);
  std::vector<float> external = {1.5f, -2.0f, 3.25f};
  ASSERT_TRUE(reducer.AddGradient("external", dist::View(external)).ok());
  ASSERT_TRUE(reducer.AddBucketedGradient("inside", 4, DIST_FLOAT64).ok());
  ASSERT_TRUE(reducer.Finalize().ok());
  double* inside = reducer.BucketedData<double>("inside").value();
  EXPECT_FALSE(reducer.BucketedData<float>("inside").ok()) << "dtype is checked";
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 4; ++i) inside[i] = step * 10.0 + i;
    external = {1.5f * step, -2.0f, 3.25f};
    ASSERT_TRUE(reducer.MarkReady("inside").ok());
    ASSERT_TRUE(reducer.MarkReady("external").ok());
    ASSERT_TRUE(reducer.Finish().ok());
    // One rank: the average is the value itself, after a real all-reduce.
    EXPECT_EQ(inside[3], step * 10.0 + 3);
    EXPECT_EQ(external[0], 1.5f * step);
    EXPECT_EQ(external[2], 3.25f);
  }
}

TEST(GradientReducer, UnusedGradientIsNamedUnlessAllowed) {
  dist::ProcessGroup group = MakeGroup();
  {
    dist::GradientReducer reducer(group);
    ASSERT_TRUE(reducer.AddBucketedGradient("used", 2, DIST_FLOAT32).ok());
    ASSERT_TRUE(reducer.AddBucketedGradient("embedding.weight", 2, DIST_FLOAT32).ok());
    ASSERT_TRUE(reducer.Finalize().ok());
    ASSERT_TRUE(reducer.MarkReady("used").ok());
    absl::Status status = reducer.Finish();
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(status.message().find("embedding.weight"), absl::string_view::npos) << status;
    EXPECT_NE(status.message().find("allow_unused"), absl::string_view::npos) << status;
  }
  dist::GradientReducer::Options options;
  options.allow_unused = true;
  dist::GradientReducer reducer(group, options);
  ASSERT_TRUE(reducer.AddBucketedGradient("used", 2, DIST_FLOAT32).ok());
  ASSERT_TRUE(reducer.AddBucketedGradient("unused", 2, DIST_FLOAT32).ok());
  ASSERT_TRUE(reducer.Finalize().ok());
  float* unused = reducer.BucketedData<float>("unused").value();
  unused[0] = 99.0f;
  ASSERT_TRUE(reducer.MarkReady("used").ok());
  ASSERT_TRUE(reducer.Finish().ok());
  EXPECT_EQ(unused[0], 0.0f) << "an unused gradient reduces as zeros";
}

TEST(GradientReducer, MisuseErrors) {
  dist::ProcessGroup group = MakeGroup();
  dist::GradientReducer reducer(group);
  ASSERT_TRUE(reducer.AddBucketedGradient("w", 2, DIST_FLOAT32).ok());
  EXPECT_EQ(reducer.AddBucketedGradient("w", 2, DIST_FLOAT32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reducer.MarkReady("w").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(reducer.Finalize().ok());
  EXPECT_EQ(reducer.MarkReady("nope").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(reducer.MarkReady("w").ok());
  EXPECT_NE(reducer.MarkReady("w").message().find("twice"), absl::string_view::npos);
  EXPECT_TRUE(reducer.Finish().ok());
}

TEST(GradientReducer, GradientsOnAnotherDeviceThanTheBucketsAreRefusedWithTheFix) {
  dist::ProcessGroup group = MakeGroup();
  dist::GradientReducer reducer(group);  // host buckets
  float fake_device_memory[4] = {};      // never touched: refused before any copy
  const absl::Status status =
      reducer.AddGradient("w", dist_make_buffer(fake_device_memory, 4, DIST_FLOAT32, dist_cuda(1)));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("gradient 'w' is on cuda:1 but the reducer's buckets are on cpu"),
            absl::string_view::npos)
      << status;
  EXPECT_NE(status.message().find("std::make_shared<dist::CudaBucketMemory>(1)"),
            absl::string_view::npos)
      << status;
}

// Buckets from a caller's BucketMemory: every allocation, copy and fill goes
// through it, and the all-reduce gets its stream.
class CountingMemory : public dist::HostBucketMemory {
 public:
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    ++allocations;
    return HostBucketMemory::Allocate(bytes);
  }
  void Free(void* data) override {
    ++frees;
    HostBucketMemory::Free(data);
  }
  absl::Status Copy(void* to, const void* from, size_t bytes) override {
    ++copies;
    return HostBucketMemory::Copy(to, from, bytes);
  }
  int allocations = 0;
  int frees = 0;
  int copies = 0;
};

TEST(GradientReducer, UsesTheCallersBucketMemory) {
  dist::ProcessGroup group = MakeGroup();
  auto memory = std::make_shared<CountingMemory>();
  {
    dist::GradientReducer::Options options;
    options.memory = memory;
    dist::GradientReducer reducer(group, options);
    std::vector<float> b = {2.0f, 4.0f};
    ASSERT_TRUE(reducer.AddBucketedGradient("w", 3, DIST_FLOAT32).ok());
    ASSERT_TRUE(reducer.AddGradient("b", dist::View(b)).ok());
    ASSERT_TRUE(reducer.Finalize().ok());
    EXPECT_EQ(memory->allocations, 1);  // one bucket of 5 floats
    ASSERT_TRUE(reducer.MarkReady("b").ok());
    ASSERT_TRUE(reducer.MarkReady("w").ok());
    ASSERT_TRUE(reducer.Finish().ok());
    EXPECT_EQ(memory->copies, 2);                    // b in, b out
    EXPECT_EQ(b, (std::vector<float>{2.0f, 4.0f}));  // one rank: the average is itself
  }
  EXPECT_EQ(memory->frees, 1);
}

}  // namespace

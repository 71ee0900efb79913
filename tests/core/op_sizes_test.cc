// CheckOpSizes (core/op_sizes.h) and the overflow-safe count rules of
// dist/cpp/validate.hpp: byte counts and count x world size that overflow
// are errors, not wrapped-around small numbers.
#include "core/op_sizes.h"

#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "core/config.h"
#include "dist/cpp/validate.hpp"
#include "gtest/gtest.h"

namespace dist {
namespace {

dist_op_args_t Args(void* send, uint64_t send_count, void* recv, uint64_t recv_count,
                    dist_dtype_t dtype) {
  dist_op_args_t a{};
  a.send = dist_make_buffer(send, send_count, dtype, dist_cpu());
  a.recv = dist_make_buffer(recv, recv_count, dtype, dist_cpu());
  a.op = DIST_SUM;
  return a;
}

TEST(OpSizes, ElementCountTimesSizeThatWrapsIsAnError) {
  std::vector<double> buffer(16);
  const uint64_t count = (uint64_t{1} << 61) + 1;  // x 8 bytes wraps to 8
  dist_op_args_t a = Args(buffer.data(), count, buffer.data(), count, DIST_FLOAT64);
  absl::Status status = CheckOpSizes(DIST_COLL_ALL_REDUCE, a, 0, 2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(),
                                "all_reduce: send buffer of 2305843009213693953 float64 elements "
                                "(8 bytes each) is larger than any buffer can be"))
      << status;
  // Sizes that fit pass.
  a = Args(buffer.data(), 16, buffer.data(), 16, DIST_FLOAT64);
  EXPECT_TRUE(CheckOpSizes(DIST_COLL_ALL_REDUCE, a, 0, 2).ok());
}

TEST(OpSizes, ABufferThatWouldEndPastTheAddressSpaceIsAnError) {
  dist_op_args_t a =
      Args(reinterpret_cast<void*>(UINTPTR_MAX - 64), 1000, nullptr, 0, DIST_FLOAT32);
  absl::Status status = CheckOpSizes(DIST_COLL_SEND, a, 0, 2);
  EXPECT_TRUE(absl::StrContains(status.message(), "past the end of the address space")) << status;
}

TEST(OpSizes, CountTimesWorldThatOverflowsIsAnError) {
  std::vector<float> buffer(16);
  const uint64_t huge = uint64_t{1} << 62;
  // all_gather: recv must hold send x world; 2^62 x 4 wraps to 0.
  dist_op_args_t a = Args(buffer.data(), huge, buffer.data(), 0, DIST_INT8);
  absl::Status status = CheckOpSizes(DIST_COLL_ALL_GATHER, a, 0, 4);
  EXPECT_TRUE(absl::StrContains(status.message(), "send count 4611686018427387904 x world size 4"))
      << status;
  // ValidateOpArgs (used by every plugin) no longer accepts the wrapped
  // product either.
  status = ValidateOpArgs(DIST_COLL_ALL_GATHER, a, 0, 4);
  EXPECT_TRUE(absl::StrContains(status.message(), "overflows")) << status;
  a = Args(buffer.data(), 0, buffer.data(), huge, DIST_INT8);
  status = ValidateOpArgs(DIST_COLL_REDUCE_SCATTER, a, 0, 4);
  EXPECT_TRUE(absl::StrContains(status.message(), "overflows")) << status;
  status = CheckOpSizes(DIST_COLL_REDUCE_SCATTER, a, 0, 4);
  EXPECT_FALSE(status.ok());
}

TEST(OpSizes, AnUnusedBufferMayHoldAnything) {
  std::vector<float> buffer(16);
  // broadcast on a non-root: the send buffer is not used.
  dist_op_args_t a = Args(nullptr, UINT64_MAX, buffer.data(), 16, DIST_FLOAT32);
  a.root = 1;
  EXPECT_TRUE(CheckOpSizes(DIST_COLL_BROADCAST, a, 0, 2).ok());
}

TEST(OpSizes, TimeoutsAreBounded) {
  dist_op_args_t a{};
  a.timeout_ms = kMaxTimeoutMs + 1;
  absl::Status status = CheckOpSizes(DIST_COLL_BARRIER, a, 0, 2);
  EXPECT_TRUE(absl::StrContains(status.message(), "barrier: timeout_ms 2592000001 is longer"))
      << status;
  a.timeout_ms = kMaxTimeoutMs;
  EXPECT_TRUE(CheckOpSizes(DIST_COLL_BARRIER, a, 0, 2).ok());

  EXPECT_FALSE(ParseTimeout("721h", "environment (DIST_TIMEOUT)").ok());
  EXPECT_FALSE(ParseTimeout("1e300", "environment (DIST_TIMEOUT)").ok());
  absl::StatusOr<absl::Duration> tiny = ParseTimeout("0.0001", "environment (DIST_TIMEOUT)");
  ASSERT_FALSE(tiny.ok());
  EXPECT_TRUE(absl::StrContains(tiny.status().message(),
                                "environment (DIST_TIMEOUT): timeout '0.0001' is outside "
                                "[1ms, 30 days]"))
      << tiny.status();
  EXPECT_EQ(*ParseTimeout("720h", "x"), absl::Hours(720));
}

}  // namespace
}  // namespace dist

// Checks the SDK's C++ helpers against values computed independently.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "dist/cpp/half.hpp"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "dist/cpp/validate.hpp"
#include "gtest/gtest.h"

namespace dist {
namespace {

TEST(Half, Float16KnownBitPatterns) {
  EXPECT_EQ(ToFloat16(1.0f).bits, 0x3c00);
  EXPECT_EQ(ToFloat16(-2.0f).bits, 0xc000);
  EXPECT_EQ(ToFloat16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(ToFloat16(1e6f).bits, 0x7c00);           // overflow to inf
  EXPECT_EQ(ToFloat16(5.9604645e-8f).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(ToFloat16(0.0f).bits, 0x0000);
  EXPECT_TRUE(std::isnan(ToFloat(ToFloat16(std::numeric_limits<float>::quiet_NaN()))));
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(ToFloat16(1.0f + 1.0f / 2048).bits, 0x3c00);
  EXPECT_EQ(ToFloat16(1.0f + 3.0f / 2048).bits, 0x3c02);
}

TEST(Half, Float16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    Float16 h{static_cast<uint16_t>(bits)};
    const float f = ToFloat(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(ToFloat16(f).bits, h.bits) << bits;
  }
}

TEST(Half, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(ToBFloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(ToFloat(BFloat16{0x4049}), 3.140625f);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    BFloat16 b{static_cast<uint16_t>(bits)};
    const float f = ToFloat(b);
    if (std::isnan(f)) continue;
    ASSERT_EQ(ToBFloat16(f).bits, b.bits) << bits;
  }
}

// The array conversions are loops the compiler vectorizes (reduce.hpp);
// each element must come out as the scalar conversion, checked above, makes
// it: every bfloat16 and float16 pattern widened, and floats with every
// upper half and the rounding cases of the lower half narrowed, in an array
// whose length is no multiple of a vector.
TEST(Half, ArrayConversionsMatchTheScalarOnes) {
  std::vector<uint16_t> halves(0x10000 + 3);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i * 40503u);
  std::vector<float> widened(halves.size());
  for (const dist_dtype_t dtype : {DIST_BFLOAT16, DIST_FLOAT16}) {
    WidenToFloat(dtype, halves.data(), widened.data(), halves.size());
    for (size_t i = 0; i < halves.size(); ++i) {
      const float one =
          dtype == DIST_BFLOAT16 ? ToFloat(BFloat16{halves[i]}) : ToFloat(Float16{halves[i]});
      ASSERT_EQ(std::memcmp(&one, &widened[i], sizeof(float)), 0) << dtype << " " << halves[i];
    }
  }
  std::vector<float> floats;
  for (uint32_t upper = 0; upper < 0x10000; ++upper) {
    for (const uint32_t lower : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x1235u}) {
      const uint32_t bits = upper << 16 | lower;
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      floats.push_back(value);
    }
  }
  floats.push_back(1.0f);  // an odd length
  std::vector<uint16_t> narrowed(floats.size());
  for (const dist_dtype_t dtype : {DIST_BFLOAT16, DIST_FLOAT16}) {
    NarrowFromFloat(dtype, floats.data(), narrowed.data(), floats.size());
    for (size_t i = 0; i < floats.size(); ++i) {
      const uint16_t one =
          dtype == DIST_BFLOAT16 ? ToBFloat16(floats[i]).bits : ToFloat16(floats[i]).bits;
      ASSERT_EQ(one, narrowed[i]) << dtype << " " << floats[i];
    }
  }
}

TEST(Reduce, IntegerOps) {
  int32_t acc[3] = {6, -3, 12};
  const int32_t in[3] = {3, 5, 10};
  ReduceInto(DIST_INT32, DIST_BAND, acc, in, 3);
  EXPECT_EQ(acc[0], 6 & 3);
  EXPECT_EQ(acc[1], -3 & 5);
  EXPECT_EQ(acc[2], 12 & 10);
  int64_t sum[2] = {7, -7};
  const int64_t more[2] = {2, -2};
  ReduceInto(DIST_INT64, DIST_AVG, sum, more, 2);
  FinishAverage(DIST_INT64, sum, 2, 2);
  EXPECT_EQ(sum[0], 4);
  EXPECT_EQ(sum[1], -4);
}

// Integer sums and products wrap around as two's complement (what Open MPI,
// NCCL and torch give), and without undefined behaviour: the ASan+UBSan
// run of this test (tools/dev/test.sh) fails on a signed overflow.
TEST(Reduce, IntegerSumsAndProductsWrapAround) {
  int32_t acc32[3] = {INT32_MAX, INT32_MIN, 65536};
  const int32_t in32[3] = {1, -1, 65536};
  ReduceInto(DIST_INT32, DIST_SUM, acc32, in32, 2);
  EXPECT_EQ(acc32[0], INT32_MIN);
  EXPECT_EQ(acc32[1], INT32_MAX);
  ReduceInto(DIST_INT32, DIST_PRODUCT, acc32 + 2, in32 + 2, 1);
  EXPECT_EQ(acc32[2], 0);  // 2^32 mod 2^32
  int64_t acc64[2] = {INT64_MAX, int64_t{3} << 62};
  const int64_t in64[2] = {2, 2};
  ReduceInto(DIST_INT64, DIST_SUM, acc64, in64, 1);
  EXPECT_EQ(acc64[0], INT64_MIN + 1);
  ReduceInto(DIST_INT64, DIST_PRODUCT, acc64 + 1, in64 + 1, 1);
  EXPECT_EQ(acc64[1], INT64_MIN);  // 3 * 2^63 mod 2^64 = 2^63
  int8_t acc8[2] = {127, -128};
  const int8_t in8[2] = {1, -1};
  ReduceInto(DIST_INT8, DIST_SUM, acc8, in8, 2);
  EXPECT_EQ(acc8[0], -128);
  EXPECT_EQ(acc8[1], 127);
  uint8_t accu8[1] = {200};
  const uint8_t inu8[1] = {100};
  ReduceInto(DIST_UINT8, DIST_SUM, accu8, inu8, 1);
  EXPECT_EQ(accu8[0], 44);
}

TEST(Reduce, BitwiseOnFloatIsAClearError) {
  absl::Status status = ValidateReduceOp(DIST_FLOAT32, DIST_BXOR);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("bitwise"), absl::string_view::npos);
  EXPECT_TRUE(ValidateReduceOp(DIST_UINT8, DIST_BXOR).ok());
}

TEST(Reduce, HalfAccumulatesInFloat) {
  Float16 acc[1] = {ToFloat16(0.5f)};
  const Float16 in[1] = {ToFloat16(0.25f)};
  ReduceInto(DIST_FLOAT16, DIST_MAX, acc, in, 1);
  EXPECT_EQ(ToFloat(acc[0]), 0.5f);
  ReduceInto(DIST_FLOAT16, DIST_SUM, acc, in, 1);
  EXPECT_EQ(ToFloat(acc[0]), 0.75f);
}

// ReduceInto and FinishAverage run 16-bit floats through float in blocks;
// each element must come out as one scalar widen, op, narrow makes it, over
// more elements than a block, with a tail, for every op a float takes.
TEST(Reduce, HalfArraysMatchOneElementAtATime) {
  const size_t count = 1000;
  for (const dist_dtype_t dtype : {DIST_FLOAT16, DIST_BFLOAT16}) {
    const auto narrow = [dtype](float value) {
      return dtype == DIST_FLOAT16 ? ToFloat16(value).bits : ToBFloat16(value).bits;
    };
    const auto widen = [dtype](uint16_t bits) {
      return dtype == DIST_FLOAT16 ? ToFloat(Float16{bits}) : ToFloat(BFloat16{bits});
    };
    std::vector<uint16_t> a(count), b(count);
    for (size_t i = 0; i < count; ++i) {
      a[i] = narrow(std::ldexp(static_cast<float>(i % 97) - 48.3f, static_cast<int>(i % 7) - 3));
      b[i] = narrow(1.0f / (static_cast<float>(i % 13) + 0.7f) - 0.5f);
    }
    for (const dist_reduce_op_t op : {DIST_SUM, DIST_PRODUCT, DIST_MIN, DIST_MAX, DIST_AVG}) {
      std::vector<uint16_t> acc = a;
      ReduceInto(dtype, op, acc.data(), b.data(), count);
      if (op == DIST_AVG) FinishAverage(dtype, acc.data(), count, 3);
      for (size_t i = 0; i < count; ++i) {
        const float x = widen(a[i]);
        const float y = widen(b[i]);
        float expected = x + y;
        if (op == DIST_PRODUCT) expected = x * y;
        if (op == DIST_MIN) expected = y < x ? y : x;
        if (op == DIST_MAX) expected = x < y ? y : x;
        uint16_t want = narrow(expected);
        if (op == DIST_AVG) want = narrow(widen(want) / 3);
        ASSERT_EQ(acc[i], want) << dist_dtype_name(dtype) << " " << dist_reduce_op_name(op)
                                << " element " << i;
      }
    }
  }
}

TEST(Status, RoundTripThroughTheAbi) {
  dist_error_t* error = ToError(absl::DeadlineExceededError("peer 3 silent"));
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, DIST_DEADLINE_EXCEEDED);
  absl::Status back = TakeError(error);
  EXPECT_EQ(back.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(back.message(), "peer 3 silent");
  EXPECT_EQ(ToError(absl::OkStatus()), nullptr);
}

// The one overlap rule (validate.hpp): disjoint, or in place in the
// collective's own layout; rank 1 of 4, 2 floats per rank.
TEST(ValidateOpArgs, OverlapIsInPlaceInTheCollectivesLayoutOrAnError) {
  float memory[64] = {};
  auto at = [&](int element, uint64_t count) {
    return dist_make_buffer(memory + element, count, DIST_FLOAT32, dist_cpu());
  };
  struct Case {
    dist_collective_t kind;
    int send_at, recv_at;
    bool ok;
  };
  const Case cases[] = {
      {DIST_COLL_ALL_REDUCE, 0, 0, true},      {DIST_COLL_ALL_REDUCE, 0, 2, true},
      {DIST_COLL_ALL_REDUCE, 0, 1, false},     {DIST_COLL_ALL_GATHER, 2, 0, true},
      {DIST_COLL_ALL_GATHER, 0, 0, false},     {DIST_COLL_ALL_GATHER, 3, 0, false},
      {DIST_COLL_ALL_GATHER, 0, 8, true},      {DIST_COLL_REDUCE_SCATTER, 0, 2, true},
      {DIST_COLL_REDUCE_SCATTER, 0, 0, false}, {DIST_COLL_REDUCE_SCATTER, 0, 8, true},
      {DIST_COLL_ALL_TO_ALL, 0, 0, false},     {DIST_COLL_ALL_TO_ALL, 0, 8, true},
      {DIST_COLL_GATHER, 2, 0, false},         {DIST_COLL_SCATTER, 0, 2, false},
  };
  for (const Case& c : cases) {
    const bool all_gather = c.kind == DIST_COLL_ALL_GATHER || c.kind == DIST_COLL_GATHER;
    const bool scatter = c.kind == DIST_COLL_REDUCE_SCATTER || c.kind == DIST_COLL_SCATTER;
    const bool all_to_all = c.kind == DIST_COLL_ALL_TO_ALL;
    dist_op_args_t a{};
    a.struct_size = sizeof(a);
    a.send = at(c.send_at, scatter || all_to_all ? 8 : 2);
    a.recv = at(c.recv_at, all_gather || all_to_all ? 8 : 2);
    a.root = 1;  // this rank: both buffers used
    const absl::Status status = ValidateOpArgs(c.kind, a, 1, 4);
    EXPECT_EQ(status.ok(), c.ok) << dist_collective_name(c.kind) << " send@" << c.send_at
                                 << " recv@" << c.recv_at << ": " << status;
    if (!c.ok) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace dist

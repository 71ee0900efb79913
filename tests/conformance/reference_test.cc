// Tests of the conformance kit's own reference logic, against the SDK's
// independent CPU reduction (dist/cpp/reduce.hpp) run in the dtype itself.
#include "sdk/conformance/reference.h"

#include <cstring>
#include <set>
#include <vector>

#include "dist/cpp/reduce.hpp"
#include "gtest/gtest.h"

namespace dist::conformance {
namespace {

constexpr dist_dtype_t kAllDtypes[] = {DIST_INT8,    DIST_UINT8,    DIST_INT32,   DIST_INT64,
                                       DIST_FLOAT16, DIST_BFLOAT16, DIST_FLOAT32, DIST_FLOAT64};

std::vector<unsigned char> Bytes(dist_dtype_t dtype, uint64_t count) {
  return std::vector<unsigned char>(dist_dtype_size(dtype) * count + 1);
}

// Reduces the ranks' real dtype buffers one by one, as a backend would.
TEST(ReferenceTest, ExpectedReductionMatchesReducingInTheDtype) {
  constexpr uint64_t kCount = 257;
  for (dist_dtype_t dtype : kAllDtypes) {
    for (int op_index = 0; op_index < DIST_REDUCE_OP_COUNT; ++op_index) {
      const auto op = static_cast<dist_reduce_op_t>(op_index);
      if (!ValidateReduceOp(dtype, op).ok()) continue;
      for (int world = 1; world <= 8; ++world) {
        SCOPED_TRACE(testing::Message() << dist_dtype_name(dtype) << " " << dist_reduce_op_name(op)
                                        << " world " << world);
        const ValueDomain domain{dtype, op, world};
        const uint64_t seed = MixSeed(op_index, world);
        auto acc = Bytes(dtype, kCount);
        auto in = Bytes(dtype, kCount);
        FillInput(domain, seed, 0, 5, kCount, acc.data());
        for (int r = 1; r < world; ++r) {
          FillInput(domain, seed, r, 5, kCount, in.data());
          ReduceInto(dtype, op, acc.data(), in.data(), kCount);
        }
        if (op == DIST_AVG) FinishAverage(dtype, acc.data(), kCount, world);
        auto expected = Bytes(dtype, kCount);
        FillExpectedReduction(domain, seed, 5, kCount, expected.data());
        // Only AVG on floats may round differently; everything else is exact.
        const absl::Status status =
            CompareElements(dtype, acc.data(), expected.data(), kCount, ReductionTolerance(domain));
        EXPECT_TRUE(status.ok()) << status;
      }
    }
  }
}

TEST(ReferenceTest, InputsAreExactInTheirDtype) {
  for (dist_dtype_t dtype : kAllDtypes) {
    for (int op_index = -1; op_index < DIST_REDUCE_OP_COUNT; ++op_index) {
      ValueDomain domain{dtype, std::nullopt, 4};
      if (op_index >= 0) {
        domain.op = static_cast<dist_reduce_op_t>(op_index);
        if (!ValidateReduceOp(dtype, *domain.op).ok()) continue;
      }
      auto buffer = Bytes(dtype, 1000);
      FillInput(domain, 99, 3, 0, 1000, buffer.data());
      for (uint64_t i = 0; i < 1000; ++i) {
        const Wide want = InputValue(domain, 99, 3, i);
        const Wide got = LoadElement(dtype, buffer.data(), i);
        if (dist_dtype_is_floating(dtype)) {
          ASSERT_EQ(got.f, want.f) << dist_dtype_name(dtype) << " element " << i;
        } else {
          ASSERT_EQ(got.i, want.i) << dist_dtype_name(dtype) << " element " << i;
        }
      }
    }
  }
}

// Payloads must tell ranks and positions apart, or a misplaced block would
// pass unnoticed.
TEST(ReferenceTest, PayloadsDifferAcrossRanksAndIndices) {
  for (dist_dtype_t dtype : kAllDtypes) {
    const ValueDomain domain{dtype, std::nullopt, 4};
    int same_across_ranks = 0;
    std::set<double> distinct;
    for (uint64_t i = 0; i < 512; ++i) {
      const Wide a = InputValue(domain, 7, 0, i);
      const Wide b = InputValue(domain, 7, 1, i);
      if (a.f == b.f && a.i == b.i) ++same_across_ranks;
      distinct.insert(a.f + static_cast<double>(a.i));
    }
    EXPECT_LT(same_across_ranks, 20) << dist_dtype_name(dtype);
    EXPECT_GT(distinct.size(), 100u) << dist_dtype_name(dtype);
  }
}

TEST(ReferenceTest, CompareNamesTheFirstDifferingElement) {
  std::vector<float> expected = {1, 2, 3, 4};
  std::vector<float> got = expected;
  EXPECT_TRUE(CompareElements(DIST_FLOAT32, got.data(), expected.data(), 4, 0).ok());
  got[2] = 3.5f;
  got[3] = 0;
  const absl::Status status = CompareElements(DIST_FLOAT32, got.data(), expected.data(), 4, 0);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("element 2: expected 3, got 3.5 (2 of 4 elements differ)"),
            std::string::npos)
      << status;
  EXPECT_TRUE(CompareElements(DIST_FLOAT32, got.data(), expected.data(), 2, 0).ok());
  std::vector<int8_t> a = {1, -2}, b = {1, -3};
  EXPECT_FALSE(CompareElements(DIST_INT8, a.data(), b.data(), 2, 0).ok());
}

TEST(ReferenceTest, ToleranceOnlyForFloatingAverage) {
  EXPECT_EQ(ReductionTolerance({DIST_FLOAT32, DIST_SUM, 4}), 0.0);
  EXPECT_EQ(ReductionTolerance({DIST_INT32, DIST_AVG, 4}), 0.0);
  EXPECT_GT(ReductionTolerance({DIST_BFLOAT16, DIST_AVG, 4}), 0.0);
  // A few roundings of the largest input, well below the 1/3 step between
  // distinct float32 averages over 3 ranks of integers.
  EXPECT_LT(ReductionTolerance({DIST_FLOAT32, DIST_AVG, 3}), 0.1);
}

TEST(ReferenceTest, IntegerAverageTruncatesTowardZero) {
  const ValueDomain domain{DIST_INT32, DIST_AVG, 3};
  for (uint64_t i = 0; i < 100; ++i) {
    int64_t sum = 0;
    for (int r = 0; r < 3; ++r) sum += InputValue(domain, 5, r, i).i;
    int32_t got = 0;
    FillExpectedReduction(domain, 5, i, 1, &got);
    ASSERT_EQ(got, sum / 3);
  }
}

}  // namespace
}  // namespace dist::conformance

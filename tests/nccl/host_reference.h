// Host-side data for the GPU tests: buffers of any dist dtype built from
// doubles, the inputs each rank contributes, and the expected result of
// every operation computed on the CPU (independently of NCCL).
#ifndef DIST_TESTS_NCCL_HOST_REFERENCE_H_
#define DIST_TESTS_NCCL_HOST_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/types.h"

namespace dist_nccl::testing {

struct HostBuffer {
  dist_dtype_t dtype = DIST_FLOAT32;
  std::vector<uint8_t> bytes;

  size_t count() const { return bytes.size() / dist_dtype_size(dtype); }
  void* data() { return bytes.data(); }
  double At(size_t i) const;
  void Put(size_t i, double value);
};

HostBuffer Zeros(dist_dtype_t dtype, size_t count);

// What `rank` contributes: small integers, exact in every dtype, so sums
// and products of up to 8 ranks stay exact (products use 1 and 2 only).
HostBuffer Input(dist_dtype_t dtype, dist_reduce_op_t op, int rank, size_t count);

// The element-wise reduction of every rank's Input, as the SDK's CPU
// reduction computes it (avg: sum, then divided by the world size).
HostBuffer Reduced(dist_dtype_t dtype, dist_reduce_op_t op, int world, size_t count);

// Block `block` (of `count` elements) of `buffer`.
HostBuffer Block(const HostBuffer& buffer, size_t block, size_t count);
// Blocks side by side.
HostBuffer Concat(const std::vector<HostBuffer>& blocks);

// "" when `actual` matches `expected` (integers exactly, floating dtypes
// within a relative tolerance that covers ncclAvg's pre-multiplication);
// otherwise the first mismatch.
std::string Compare(const HostBuffer& actual, const HostBuffer& expected);

}  // namespace dist_nccl::testing

#endif  // DIST_TESTS_NCCL_HOST_REFERENCE_H_

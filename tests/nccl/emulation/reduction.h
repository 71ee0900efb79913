// Element-wise math of the emulated NCCL: every NCCL data type of the
// header except fp8, and sum, prod, min, max and avg. Written apart from
// the test's host reference (tests/nccl/host_reference.cc), which uses the
// SDK's reduce.hpp: floating-point values accumulate in double here and
// are rounded once.
#ifndef DIST_TESTS_NCCL_EMULATION_REDUCTION_H_
#define DIST_TESTS_NCCL_EMULATION_REDUCTION_H_

#include <nccl.h>

#include <cstddef>
#include <vector>

namespace dist::emulation {

// Bytes per element; 0 for a type the emulation does not know.
size_t ElementSize(ncclDataType_t type);
bool KnownReduction(ncclRedOp_t op);

// out[i] = inputs[0][i] op inputs[1][i] op ... for i < count.
void Reduce(ncclDataType_t type, ncclRedOp_t op, const std::vector<const void*>& inputs,
            size_t count, void* out);

}  // namespace dist::emulation

#endif  // DIST_TESTS_NCCL_EMULATION_REDUCTION_H_

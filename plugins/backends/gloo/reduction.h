// Element-wise reduction functions in the shape Gloo's collectives call
// them: fn(out, a, b, n) with out == a allowed.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_REDUCTION_H_
#define DIST_PLUGINS_BACKENDS_GLOO_REDUCTION_H_

#include <cstddef>
#include <functional>

#include "dist/types.h"

namespace dist_gloo {

using ReduceFn = std::function<void(void*, const void*, const void*, size_t)>;

// For every dtype except float16/bfloat16, which callers widen to float32
// first so that a sum over many ranks rounds once. AVG reduces as SUM; the
// caller divides once at the end (FinishAverage). The op must have passed
// ValidateReduceOp.
ReduceFn ReductionFor(dist_dtype_t dtype, dist_reduce_op_t op);

// True for the dtypes that are widened to float32 for reductions.
inline bool IsHalf(dist_dtype_t dtype) { return dtype == DIST_FLOAT16 || dtype == DIST_BFLOAT16; }

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_REDUCTION_H_

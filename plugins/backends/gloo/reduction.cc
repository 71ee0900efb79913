#include "plugins/backends/gloo/reduction.h"

#include <cstdint>
#include <cstring>

#include "dist/cpp/reduce.hpp"
#include "gloo/math.h"

namespace dist_gloo {
namespace {

// Gloo's own kernels for the arithmetic ops (the same code raw Gloo users
// run), typed by T.
using RawFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn Arithmetic(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:
      return static_cast<RawFn>(&gloo::sum<T>);
    case DIST_PRODUCT:
      return static_cast<RawFn>(&gloo::product<T>);
    case DIST_MIN:
      return static_cast<RawFn>(&gloo::min<T>);
    case DIST_MAX:
      return static_cast<RawFn>(&gloo::max<T>);
    default:
      return nullptr;
  }
}

}  // namespace

ReduceFn ReductionFor(dist_dtype_t dtype, dist_reduce_op_t op) {
  if (dist::IsBitwise(op)) {
    // Bitwise ops on integers: the SDK's kernels, made three-operand.
    const size_t element = dist_dtype_size(dtype);
    return [dtype, op, element](void* out, const void* a, const void* b, size_t n) {
      if (out == b) {
        dist::ReduceInto(dtype, op, out, a, n);
        return;
      }
      if (out != a) std::memmove(out, a, n * element);
      dist::ReduceInto(dtype, op, out, b, n);
    };
  }
  switch (dtype) {
    case DIST_INT8:
      return Arithmetic<int8_t>(op);
    case DIST_UINT8:
      return Arithmetic<uint8_t>(op);
    case DIST_INT32:
      return Arithmetic<int32_t>(op);
    case DIST_INT64:
      return Arithmetic<int64_t>(op);
    case DIST_FLOAT32:
      return Arithmetic<float>(op);
    case DIST_FLOAT64:
      return Arithmetic<double>(op);
    default:
      return nullptr;  // float16/bfloat16 are widened by the caller
  }
}

}  // namespace dist_gloo

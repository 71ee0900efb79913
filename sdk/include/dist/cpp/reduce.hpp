// dist SDK, C++ side: element-wise reductions on CPU buffers, for backends
// whose library cannot reduce a dtype or op itself (float16, bfloat16, avg,
// bitwise ops). float16/bfloat16 accumulate in float: convert with
// WidenToFloat, reduce the floats, narrow once at the end, so a sum over many
// ranks rounds once instead of once per rank.
#ifndef DIST_CPP_REDUCE_HPP_
#define DIST_CPP_REDUCE_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/half.hpp"
#include "dist/types.h"

namespace dist {

inline bool IsBitwise(dist_reduce_op_t op) {
  return op == DIST_BAND || op == DIST_BOR || op == DIST_BXOR;
}

// OK when `op` is defined on `dtype`; a clear error otherwise.
inline absl::Status ValidateReduceOp(dist_dtype_t dtype, dist_reduce_op_t op) {
  if (static_cast<int>(op) < 0 || op >= DIST_REDUCE_OP_COUNT) {
    return absl::InvalidArgumentError(absl::StrCat("unknown reduce op ", static_cast<int>(op)));
  }
  if (dist_dtype_size(dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown dtype ", static_cast<int>(dtype)));
  }
  if (IsBitwise(op) && dist_dtype_is_floating(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reduce op ", dist_reduce_op_name(op), " is bitwise and ", dist_dtype_name(dtype),
        " is floating point; use an integer dtype or sum/product/min/max/avg"));
  }
  return absl::OkStatus();
}

namespace internal {

// The loops below are most of a CPU reduction's time, and the SDK's headers
// build with each plugin's flags. At -O2 GCC 12 vectorizes only loops that
// need neither a run-time check (that `acc` and `in` do not overlap) nor a
// scalar tail for a count it cannot know, its "very cheap" cost model; so
// without this a -c opt plugin adds one float at a time (the shm plugin's
// 2 KiB all_reduce spent a quarter of its samples there). Clang vectorizes
// such loops at -O2 already and has no `optimize` attribute.
#if defined(__GNUC__) && !defined(__clang__)
#define DIST_VECTORIZE_LOOPS __attribute__((optimize("tree-vectorize")))
#else
#define DIST_VECTORIZE_LOOPS
#endif

// The type a sum or product of T is computed in: integers wrap around on
// overflow (two's complement, as MPI libraries and torch do), so they are
// added and multiplied unsigned, where wrapping is defined; a signed
// overflow is undefined behaviour, which the optimizer may assume never
// happens. Floating point is itself.
template <typename T, bool = std::is_integral_v<T>>
struct Arithmetic {
  using type = T;
};
template <typename T>
struct Arithmetic<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
DIST_VECTORIZE_LOOPS void ReduceTyped(dist_reduce_op_t op, T* acc, const T* in, size_t count) {
  using A = typename Arithmetic<T>::type;
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:  // divided once at the end, see FinishAverage
      for (size_t i = 0; i < count; ++i) {
        acc[i] = static_cast<T>(static_cast<A>(static_cast<A>(acc[i]) + static_cast<A>(in[i])));
      }
      break;
    case DIST_PRODUCT:
      for (size_t i = 0; i < count; ++i) {
        acc[i] = static_cast<T>(static_cast<A>(static_cast<A>(acc[i]) * static_cast<A>(in[i])));
      }
      break;
    case DIST_MIN:
      for (size_t i = 0; i < count; ++i) acc[i] = std::min(acc[i], in[i]);
      break;
    case DIST_MAX:
      for (size_t i = 0; i < count; ++i) acc[i] = std::max(acc[i], in[i]);
      break;
    default:
      if constexpr (std::is_integral_v<T>) {
        if (op == DIST_BAND) {
          for (size_t i = 0; i < count; ++i) acc[i] = static_cast<T>(acc[i] & in[i]);
        } else if (op == DIST_BOR) {
          for (size_t i = 0; i < count; ++i) acc[i] = static_cast<T>(acc[i] | in[i]);
        } else if (op == DIST_BXOR) {
          for (size_t i = 0; i < count; ++i) acc[i] = static_cast<T>(acc[i] ^ in[i]);
        }
      }
      break;
  }
}

// values[i] /= ranks (integers truncate toward zero); a loop of its own so
// that it vectorizes like ReduceTyped (a float division a cycle or more
// apiece otherwise).
template <typename T>
DIST_VECTORIZE_LOOPS void DivideAll(T* values, size_t count, int ranks) {
  for (size_t i = 0; i < count; ++i) values[i] = static_cast<T>(values[i] / ranks);
}

// 16-bit floats: widen, reduce, narrow (one rounding per pair), one element
// at a time. Blocks through WidenAll, ReduceTyped<float> and NarrowAll were
// slower (2026-12-04, 64 Ki elements, -O2: bfloat16 sum 37 -> 50 us, float16
// 230 -> 247): narrowing to 16 bits with SSE2 alone costs about as much as
// this whole loop.
template <typename Half>
void ReduceHalf(dist_reduce_op_t op, Half* acc, const Half* in, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const float b = ToFloat(in[i]);
    float a = ToFloat(acc[i]);
    switch (op) {
      case DIST_PRODUCT:
        a *= b;
        break;
      case DIST_MIN:
        a = std::min(a, b);
        break;
      case DIST_MAX:
        a = std::max(a, b);
        break;
      case DIST_SUM:
      case DIST_AVG:  // divided once at the end, see FinishAverage
        a += b;
        break;
      default:  // bitwise: refused for floating point (ValidateReduceOp)
        break;
    }
    if constexpr (std::is_same_v<Half, Float16>) {
      acc[i] = ToFloat16(a);
    } else {
      acc[i] = ToBFloat16(a);
    }
  }
}

}  // namespace internal

// acc[i] = acc[i] (op) in[i] for i < count. AVG sums; call FinishAverage
// after the last rank's contribution. The op must pass ValidateReduceOp.
inline void ReduceInto(dist_dtype_t dtype, dist_reduce_op_t op, void* acc, const void* in,
                       size_t count) {
  switch (dtype) {
    case DIST_INT8:
      internal::ReduceTyped(op, static_cast<int8_t*>(acc), static_cast<const int8_t*>(in), count);
      break;
    case DIST_UINT8:
      internal::ReduceTyped(op, static_cast<uint8_t*>(acc), static_cast<const uint8_t*>(in), count);
      break;
    case DIST_INT32:
      internal::ReduceTyped(op, static_cast<int32_t*>(acc), static_cast<const int32_t*>(in), count);
      break;
    case DIST_INT64:
      internal::ReduceTyped(op, static_cast<int64_t*>(acc), static_cast<const int64_t*>(in), count);
      break;
    case DIST_FLOAT32:
      internal::ReduceTyped(op, static_cast<float*>(acc), static_cast<const float*>(in), count);
      break;
    case DIST_FLOAT64:
      internal::ReduceTyped(op, static_cast<double*>(acc), static_cast<const double*>(in), count);
      break;
    case DIST_FLOAT16:
      internal::ReduceHalf(op, static_cast<Float16*>(acc), static_cast<const Float16*>(in), count);
      break;
    case DIST_BFLOAT16:
      internal::ReduceHalf(op, static_cast<BFloat16*>(acc), static_cast<const BFloat16*>(in),
                           count);
      break;
    default:
      break;
  }
}

// Divides every element by `ranks` (AVG). Integers divide truncating toward
// zero, as torch.distributed does for integer tensors.
inline void FinishAverage(dist_dtype_t dtype, void* data, size_t count, int ranks) {
  if (ranks <= 1) return;
  switch (dtype) {
    case DIST_INT8:
      internal::DivideAll(static_cast<int8_t*>(data), count, ranks);
      break;
    case DIST_UINT8:
      internal::DivideAll(static_cast<uint8_t*>(data), count, ranks);
      break;
    case DIST_INT32:
      internal::DivideAll(static_cast<int32_t*>(data), count, ranks);
      break;
    case DIST_INT64:
      internal::DivideAll(static_cast<int64_t*>(data), count, ranks);
      break;
    case DIST_FLOAT32:
      internal::DivideAll(static_cast<float*>(data), count, ranks);
      break;
    case DIST_FLOAT64:
      internal::DivideAll(static_cast<double*>(data), count, ranks);
      break;
    case DIST_FLOAT16: {
      auto* values = static_cast<Float16*>(data);
      for (size_t i = 0; i < count; ++i) values[i] = ToFloat16(ToFloat(values[i]) / ranks);
      break;
    }
    case DIST_BFLOAT16: {
      auto* values = static_cast<BFloat16*>(data);
      for (size_t i = 0; i < count; ++i) values[i] = ToBFloat16(ToFloat(values[i]) / ranks);
      break;
    }
    default:
      break;
  }
}

// float16/bfloat16 <-> float, for accumulating in float.
namespace internal {

// One loop per 16-bit type, vectorized like ReduceTyped. bfloat16's
// conversions are shifts and a rounding add, which vectorize; float16's
// branch on subnormals and do not.
template <typename Half>
DIST_VECTORIZE_LOOPS void WidenAll(const Half* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = ToFloat(in[i]);
}

template <typename Half>
DIST_VECTORIZE_LOOPS void NarrowAll(const float* in, Half* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<Half, Float16>) {
      out[i] = ToFloat16(in[i]);
    } else {
      out[i] = ToBFloat16(in[i]);
    }
  }
}

}  // namespace internal

inline void WidenToFloat(dist_dtype_t dtype, const void* in, float* out, size_t count) {
  if (dtype == DIST_FLOAT16) {
    internal::WidenAll(static_cast<const Float16*>(in), out, count);
  } else {
    internal::WidenAll(static_cast<const BFloat16*>(in), out, count);
  }
}

inline void NarrowFromFloat(dist_dtype_t dtype, const float* in, void* out, size_t count) {
  if (dtype == DIST_FLOAT16) {
    internal::NarrowAll(in, static_cast<Float16*>(out), count);
  } else {
    internal::NarrowAll(in, static_cast<BFloat16*>(out), count);
  }
}

}  // namespace dist

#endif  // DIST_CPP_REDUCE_HPP_

// Typed element access and reference reductions for shm tests: every
// expected value is computed here, independently of the plugin.
#ifndef DIST_TESTS_SHM_VALUES_H_
#define DIST_TESTS_SHM_VALUES_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dist/cpp/half.hpp"
#include "dist/types.h"

namespace dist_test {

inline void Put(dist_dtype_t t, void* p, size_t i, double v) {
  switch (t) {
    case DIST_INT8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      break;
    case DIST_UINT8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      break;
    case DIST_INT32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    case DIST_INT64:
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case DIST_FLOAT16:
      static_cast<dist::Float16*>(p)[i] = dist::ToFloat16(static_cast<float>(v));
      break;
    case DIST_BFLOAT16:
      static_cast<dist::BFloat16*>(p)[i] = dist::ToBFloat16(static_cast<float>(v));
      break;
    case DIST_FLOAT32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DIST_FLOAT64:
      static_cast<double*>(p)[i] = v;
      break;
    default:
      break;
  }
}

inline double Get(dist_dtype_t t, const void* p, size_t i) {
  switch (t) {
    case DIST_INT8:
      return static_cast<const int8_t*>(p)[i];
    case DIST_UINT8:
      return static_cast<const uint8_t*>(p)[i];
    case DIST_INT32:
      return static_cast<const int32_t*>(p)[i];
    case DIST_INT64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DIST_FLOAT16:
      return dist::ToFloat(static_cast<const dist::Float16*>(p)[i]);
    case DIST_BFLOAT16:
      return dist::ToFloat(static_cast<const dist::BFloat16*>(p)[i]);
    case DIST_FLOAT32:
      return static_cast<const float*>(p)[i];
    case DIST_FLOAT64:
      return static_cast<const double*>(p)[i];
    default:
      return NAN;
  }
}

// Small integers: exact in every dtype, products over 4 ranks stay <= 81.
inline double ReduceInput(int rank, uint64_t i) { return 1 + (rank * 7 + i) % 3; }
// Distinct per (rank, i), below 100 so int8 and bfloat16 hold them exactly.
inline double DataInput(int rank, uint64_t i) { return (rank * 31 + i * 7) % 100; }

// The expected reduction over ranks 0..world-1 of ReduceInput(q, i), as
// stored in dtype t.
inline double Expected(dist_dtype_t t, dist_reduce_op_t op, int world, uint64_t i) {
  int64_t acc = static_cast<int64_t>(ReduceInput(0, i));
  for (int q = 1; q < world; ++q) {
    const int64_t v = static_cast<int64_t>(ReduceInput(q, i));
    switch (op) {
      case DIST_SUM:
      case DIST_AVG:
        acc += v;
        break;
      case DIST_PRODUCT:
        acc *= v;
        break;
      case DIST_MIN:
        acc = std::min(acc, v);
        break;
      case DIST_MAX:
        acc = std::max(acc, v);
        break;
      case DIST_BAND:
        acc &= v;
        break;
      case DIST_BOR:
        acc |= v;
        break;
      case DIST_BXOR:
        acc ^= v;
        break;
      default:
        break;
    }
  }
  double result = static_cast<double>(acc);
  if (op == DIST_AVG) {
    result = dist_dtype_is_floating(t) ? result / world : static_cast<double>(acc / world);
  }
  unsigned char cell[8];
  Put(t, cell, 0, result);  // round as the dtype does
  return Get(t, cell, 0);
}

inline std::vector<unsigned char> Bytes(dist_dtype_t t, uint64_t count) {
  return std::vector<unsigned char>(count * dist_dtype_size(t) + 1);
}

}  // namespace dist_test

#endif  // DIST_TESTS_SHM_VALUES_H_

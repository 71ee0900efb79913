#include "tools/distbench/pattern.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "dist/cpp/half.hpp"

namespace distbench {
namespace {

// Reads and writes one element of a dtype as double.
template <typename T>
struct Codec {
  static void Put(char* base, uint64_t i, double v) {
    const T t = static_cast<T>(v);
    std::memcpy(base + i * sizeof(T), &t, sizeof(T));
  }
  static double Get(const char* base, uint64_t i) {
    T t;
    std::memcpy(&t, base + i * sizeof(T), sizeof(T));
    return static_cast<double>(t);
  }
};

template <>
struct Codec<dist::Float16> {
  static void Put(char* base, uint64_t i, double v) {
    const dist::Float16 t = dist::ToFloat16(static_cast<float>(v));
    std::memcpy(base + i * 2, &t, 2);
  }
  static double Get(const char* base, uint64_t i) {
    dist::Float16 t;
    std::memcpy(&t, base + i * 2, 2);
    return dist::ToFloat(t);
  }
};

template <>
struct Codec<dist::BFloat16> {
  static void Put(char* base, uint64_t i, double v) {
    const dist::BFloat16 t = dist::ToBFloat16(static_cast<float>(v));
    std::memcpy(base + i * 2, &t, 2);
  }
  static double Get(const char* base, uint64_t i) {
    dist::BFloat16 t;
    std::memcpy(&t, base + i * 2, 2);
    return dist::ToFloat(t);
  }
};

// Calls fn with a Codec<T> for the dtype's storage type (T is the
// arithmetic type for integers, so wrapping can be reproduced).
template <typename Fn>
auto WithDtype(dist_dtype_t dtype, Fn&& fn) {
  switch (dtype) {
    case DIST_INT8:
      return fn(Codec<int8_t>{}, int8_t{});
    case DIST_UINT8:
      return fn(Codec<uint8_t>{}, uint8_t{});
    case DIST_INT32:
      return fn(Codec<int32_t>{}, int32_t{});
    case DIST_INT64:
      return fn(Codec<int64_t>{}, int64_t{});
    case DIST_FLOAT16:
      return fn(Codec<dist::Float16>{}, float{});
    case DIST_BFLOAT16:
      return fn(Codec<dist::BFloat16>{}, float{});
    case DIST_FLOAT32:
      return fn(Codec<float>{}, float{});
    default:
      return fn(Codec<double>{}, double{});
  }
}

// The reduction of v(q, k) over every rank q, as the dtype computes it.
template <typename T>
double Reduced(const Case& c, uint64_t k) {
  int64_t acc = PatternValue(c, 0, k);
  for (int q = 1; q < c.world_size; ++q) {
    const int64_t v = PatternValue(c, q, k);
    switch (c.redop) {
      case DIST_SUM:
      case DIST_AVG:
        acc += v;
        break;
      case DIST_PRODUCT:
        acc *= v;
        break;
      case DIST_MIN:
        acc = v < acc ? v : acc;
        break;
      case DIST_MAX:
        acc = v > acc ? v : acc;
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
  if constexpr (std::is_integral_v<T>) {
    // Integers wrap in their own width (values stay small, but a large world
    // size could overflow int8) and AVG truncates.
    T wrapped = static_cast<T>(acc);
    if (c.redop == DIST_AVG) wrapped = static_cast<T>(wrapped / c.world_size);
    return static_cast<double>(wrapped);
  } else {
    if (c.redop == DIST_AVG) return static_cast<double>(acc) / c.world_size;
    return static_cast<double>(acc);
  }
}

double Tolerance(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_FLOAT16:
      return 1e-3;  // 11-bit significand
    case DIST_BFLOAT16:
      return 8e-3;  // 8-bit significand
    case DIST_FLOAT32:
      return 1e-6;
    case DIST_FLOAT64:
      return 1e-12;
    default:
      return 0.0;
  }
}

}  // namespace

int64_t PatternValue(const Case& c, int rank, uint64_t k) {
  if (c.op->reduces && c.redop == DIST_PRODUCT) {
    return (k + static_cast<uint64_t>(rank)) % 4 == 0 ? 2 : 1;
  }
  return static_cast<int64_t>((3 * k + 7 * static_cast<uint64_t>(rank)) % 5) + 1;
}

std::vector<char> MakeSendData(const Case& c) {
  std::vector<char> data(c.send_count() * c.element_size());
  WithDtype(c.dtype, [&](auto codec, auto) {
    using C = decltype(codec);
    for (uint64_t k = 0; k < c.send_count(); ++k) {
      C::Put(data.data(), k, static_cast<double>(PatternValue(c, c.rank, k)));
    }
    return 0;
  });
  return data;
}

std::vector<char> MakePoisonedRecv(const Case& c) {
  std::vector<char> data(c.recv_count() * c.element_size());
  WithDtype(c.dtype, [&](auto codec, auto) {
    using C = decltype(codec);
    // -7 is never produced: inputs are 1..5 and reductions of them are >= 0
    // (uint8 gets 249, also out of reach for small worlds).
    const double poison = c.dtype == DIST_UINT8 ? 249.0 : -7.0;
    for (uint64_t k = 0; k < c.recv_count(); ++k) C::Put(data.data(), k, poison);
    return 0;
  });
  return data;
}

int64_t CountWrong(const Case& c, const std::vector<char>& recv) {
  const uint64_t n = c.block;
  const int r = c.rank;
  const int w = c.world_size;
  const bool at_root = r == c.root;
  if ((c.op->op == Op::kReduce || c.op->op == Op::kGather) && !at_root) return 0;
  if (c.op->op == Op::kBarrier) return 0;
  return WithDtype(c.dtype, [&](auto codec, auto arith) -> int64_t {
    using C = decltype(codec);
    using T = decltype(arith);
    const double tolerance = Tolerance(c.dtype);
    // expected(i) for recv element i.
    auto expected = [&](uint64_t i) -> double {
      switch (c.op->op) {
        case Op::kAllReduce:
        case Op::kReduce:
          return Reduced<T>(c, i);
        case Op::kReduceScatter:
          return Reduced<T>(c, r * n + i);
        case Op::kBroadcast:
          return static_cast<double>(PatternValue(c, c.root, i));
        case Op::kAllGather:
        case Op::kGather:
          return static_cast<double>(PatternValue(c, static_cast<int>(i / n), i % n));
        case Op::kScatter:
          return static_cast<double>(PatternValue(c, c.root, r * n + i));
        case Op::kAllToAll:
          // Block j came from rank j, which sent its block r.
          return static_cast<double>(PatternValue(c, static_cast<int>(i / n), r * n + i % n));
        case Op::kSendRecv:
          return static_cast<double>(PatternValue(c, (r + w - 1) % w, i));
        case Op::kBarrier:
          break;
      }
      return 0.0;
    };
    int64_t wrong = 0;
    for (uint64_t i = 0; i < c.recv_count(); ++i) {
      const double want = expected(i);
      const double got = C::Get(recv.data(), i);
      const double allowed = tolerance * std::max(1.0, std::fabs(want));
      if (!(std::fabs(got - want) <= allowed)) ++wrong;
    }
    return wrong;
  });
}

}  // namespace distbench

#include "sdk/conformance/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dist/cpp/half.hpp"

namespace dist::conformance {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Hash(uint64_t seed, int rank, uint64_t index) {
  return SplitMix64(seed ^
                    SplitMix64(static_cast<uint64_t>(rank) * 0x100000001b3ull ^ SplitMix64(index)));
}

bool IsUnsigned(dist_dtype_t dtype) { return dtype == DIST_UINT8; }

// Largest magnitude of a payload value, chosen so that every value (integers
// for integer dtypes, multiples of 0.5 for floats) is exact in the dtype.
int64_t PayloadBound(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_INT8:
      return 100;
    case DIST_UINT8:
      return 200;
    case DIST_FLOAT16:
      return 1000;  // /2: up to 500, 10 significant bits
    case DIST_BFLOAT16:
      return 200;  // /2: up to 100, 8 significant bits
    default:
      return 1000000;
  }
}

// Largest integer magnitude whose sum over `world` ranks stays exact (and,
// for integers, in range).
int64_t SumBound(dist_dtype_t dtype, int world) {
  const int64_t w = std::max(world, 1);
  int64_t limit = 1000000;
  switch (dtype) {
    case DIST_INT8:
      limit = 127;
      break;
    case DIST_UINT8:
      limit = 255;
      break;
    case DIST_FLOAT16:
      limit = 2048;
      break;  // integers exact up to 2^11
    case DIST_BFLOAT16:
      limit = 256;
      break;  // integers exact up to 2^8
    default:
      break;
  }
  return std::max<int64_t>(1, std::min<int64_t>(1000000, limit / w));
}

int64_t UniformInt(uint64_t h, int64_t low, int64_t high) {
  return low + static_cast<int64_t>(h % static_cast<uint64_t>(high - low + 1));
}

Wide FromInt(dist_dtype_t dtype, int64_t value) {
  Wide w;
  w.i = value;
  w.f = static_cast<double>(value);
  (void)dtype;
  return w;
}

int64_t WrapToDtype(dist_dtype_t dtype, int64_t value) {
  switch (dtype) {
    case DIST_INT8:
      return static_cast<int8_t>(static_cast<uint8_t>(value & 0xff));
    case DIST_UINT8:
      return static_cast<uint8_t>(value & 0xff);
    case DIST_INT32:
      return static_cast<int32_t>(static_cast<uint32_t>(value & 0xffffffff));
    default:
      return value;
  }
}

}  // namespace

uint64_t MixSeed(uint64_t a, uint64_t b) { return SplitMix64(a * 31 + SplitMix64(b)); }

double Epsilon(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_FLOAT16:
      return std::ldexp(1.0, -11);
    case DIST_BFLOAT16:
      return std::ldexp(1.0, -8);
    case DIST_FLOAT32:
      return std::ldexp(1.0, -24);
    case DIST_FLOAT64:
      return std::ldexp(1.0, -53);
    default:
      return 0.0;
  }
}

Wide InputValue(const ValueDomain& domain, uint64_t seed, int rank, uint64_t index) {
  const dist_dtype_t dtype = domain.dtype;
  const bool floating = dist_dtype_is_floating(dtype);
  const uint64_t h = Hash(seed, rank, index);
  if (!domain.op.has_value() || *domain.op == DIST_MIN || *domain.op == DIST_MAX) {
    const int64_t bound = PayloadBound(dtype);
    const int64_t k = UniformInt(h, IsUnsigned(dtype) ? 0 : -bound, bound);
    if (floating) {
      Wide w;
      w.f = static_cast<double>(k) / 2.0;
      return w;
    }
    return FromInt(dtype, k);
  }
  switch (*domain.op) {
    case DIST_SUM:
    case DIST_AVG: {
      const int64_t bound = SumBound(dtype, domain.world_size);
      return FromInt(dtype, UniformInt(h, IsUnsigned(dtype) ? 0 : -bound, bound));
    }
    case DIST_PRODUCT: {
      // Products of {-1, 1, 2} are +-2^k: exact in every floating type.
      static const int64_t kSigned[] = {-1, 1, 2};
      static const int64_t kUnsigned[] = {1, 2, 3};
      return FromInt(dtype, IsUnsigned(dtype) ? kUnsigned[h % 3] : kSigned[h % 3]);
    }
    default: {  // bitwise: random bits of the dtype's width
      return FromInt(dtype, WrapToDtype(dtype, static_cast<int64_t>(h)));
    }
  }
}

void StoreElement(dist_dtype_t dtype, const Wide& value, void* data, uint64_t i) {
  switch (dtype) {
    case DIST_INT8:
      static_cast<int8_t*>(data)[i] = static_cast<int8_t>(WrapToDtype(dtype, value.i));
      break;
    case DIST_UINT8:
      static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(WrapToDtype(dtype, value.i));
      break;
    case DIST_INT32:
      static_cast<int32_t*>(data)[i] = static_cast<int32_t>(WrapToDtype(dtype, value.i));
      break;
    case DIST_INT64:
      static_cast<int64_t*>(data)[i] = value.i;
      break;
    case DIST_FLOAT16:
      static_cast<Float16*>(data)[i] = ToFloat16(static_cast<float>(value.f));
      break;
    case DIST_BFLOAT16:
      static_cast<BFloat16*>(data)[i] = ToBFloat16(static_cast<float>(value.f));
      break;
    case DIST_FLOAT32:
      static_cast<float*>(data)[i] = static_cast<float>(value.f);
      break;
    case DIST_FLOAT64:
      static_cast<double*>(data)[i] = value.f;
      break;
    default:
      break;
  }
}

Wide LoadElement(dist_dtype_t dtype, const void* data, uint64_t i) {
  Wide w;
  switch (dtype) {
    case DIST_INT8:
      w.i = static_cast<const int8_t*>(data)[i];
      break;
    case DIST_UINT8:
      w.i = static_cast<const uint8_t*>(data)[i];
      break;
    case DIST_INT32:
      w.i = static_cast<const int32_t*>(data)[i];
      break;
    case DIST_INT64:
      w.i = static_cast<const int64_t*>(data)[i];
      break;
    case DIST_FLOAT16:
      w.f = ToFloat(static_cast<const Float16*>(data)[i]);
      return w;
    case DIST_BFLOAT16:
      w.f = ToFloat(static_cast<const BFloat16*>(data)[i]);
      return w;
    case DIST_FLOAT32:
      w.f = static_cast<const float*>(data)[i];
      return w;
    case DIST_FLOAT64:
      w.f = static_cast<const double*>(data)[i];
      return w;
    default:
      return w;
  }
  w.f = static_cast<double>(w.i);
  return w;
}

void FillInput(const ValueDomain& domain, uint64_t seed, int rank, uint64_t first_index,
               uint64_t count, void* data) {
  for (uint64_t i = 0; i < count; ++i) {
    StoreElement(domain.dtype, InputValue(domain, seed, rank, first_index + i), data, i);
  }
}

void FillExpectedReduction(const ValueDomain& domain, uint64_t seed, uint64_t first_index,
                           uint64_t count, void* out) {
  const dist_reduce_op_t op = domain.op.value_or(DIST_SUM);
  const bool floating = dist_dtype_is_floating(domain.dtype);
  const int world = std::max(domain.world_size, 1);
  for (uint64_t i = 0; i < count; ++i) {
    Wide acc = InputValue(domain, seed, 0, first_index + i);
    for (int r = 1; r < world; ++r) {
      const Wide v = InputValue(domain, seed, r, first_index + i);
      switch (op) {
        case DIST_SUM:
        case DIST_AVG:
          acc.i += v.i;
          acc.f += v.f;
          break;
        case DIST_PRODUCT:
          acc.i *= v.i;
          acc.f *= v.f;
          break;
        case DIST_MIN:
          acc.i = std::min(acc.i, v.i);
          acc.f = std::min(acc.f, v.f);
          break;
        case DIST_MAX:
          acc.i = std::max(acc.i, v.i);
          acc.f = std::max(acc.f, v.f);
          break;
        case DIST_BAND:
          acc.i &= v.i;
          break;
        case DIST_BOR:
          acc.i |= v.i;
          break;
        case DIST_BXOR:
          acc.i ^= v.i;
          break;
        default:
          break;
      }
    }
    if (op == DIST_AVG) {
      if (floating) {
        acc.f /= world;
      } else {
        // Integer AVG divides the dtype's sum, truncating toward zero.
        acc.i = WrapToDtype(domain.dtype, acc.i) / world;
      }
    }
    acc.i = WrapToDtype(domain.dtype, acc.i);
    StoreElement(domain.dtype, acc, out, i);
  }
}

double ReductionTolerance(const ValueDomain& domain) {
  if (!dist_dtype_is_floating(domain.dtype) || domain.op != DIST_AVG) return 0.0;
  // Sum-then-divide rounds once; divide-then-sum (NCCL's premultiplied sum)
  // rounds once per rank. Bound both by (W + 1) roundings of the largest
  // input.
  const double bound = static_cast<double>(SumBound(domain.dtype, domain.world_size));
  return (domain.world_size + 1) * Epsilon(domain.dtype) * std::max(1.0, bound);
}

absl::Status CompareElements(dist_dtype_t dtype, const void* got, const void* expected,
                             uint64_t count, double abs_tolerance) {
  const bool floating = dist_dtype_is_floating(dtype);
  uint64_t differing = 0;
  uint64_t first = 0;
  Wide first_got, first_expected;
  for (uint64_t i = 0; i < count; ++i) {
    const Wide g = LoadElement(dtype, got, i);
    const Wide e = LoadElement(dtype, expected, i);
    bool same;
    if (floating) {
      same = (std::isnan(g.f) && std::isnan(e.f)) || std::fabs(g.f - e.f) <= abs_tolerance;
    } else {
      same = g.i == e.i;
    }
    if (!same) {
      if (differing == 0) {
        first = i;
        first_got = g;
        first_expected = e;
      }
      ++differing;
    }
  }
  if (differing == 0) return absl::OkStatus();
  auto text = [&](const Wide& w) { return floating ? absl::StrCat(w.f) : absl::StrCat(w.i); };
  return absl::InternalError(
      absl::StrCat("element ", first, ": expected ", text(first_expected), ", got ",
                   text(first_got), " (", differing, " of ", count, " elements differ",
                   abs_tolerance > 0 ? absl::StrCat(", tolerance ", abs_tolerance) : "", ")"));
}

}  // namespace dist::conformance

// dist SDK, C++ side: float16 and bfloat16 as 16-bit storage types with
// exact conversions to and from float (round to nearest even). Reductions on
// them accumulate in float; see reduce.hpp.
#ifndef DIST_CPP_HALF_HPP_
#define DIST_CPP_HALF_HPP_

#include <cstdint>
#include <cstring>

namespace dist {

struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float FloatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

inline uint32_t BitsFromFloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float ToFloat(BFloat16 value) {
  return FloatFromBits(static_cast<uint32_t>(value.bits) << 16);
}

inline BFloat16 ToBFloat16(float value) {
  uint32_t bits = BitsFromFloat(value);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return BFloat16{static_cast<uint16_t>((bits >> 16) | 0x0040u)};  // quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>((bits + rounding) >> 16)};
}

inline float ToFloat(Float16 value) {
  const uint32_t sign = static_cast<uint32_t>(value.bits & 0x8000u) << 16;
  const uint32_t exponent = (value.bits >> 10) & 0x1fu;
  const uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) {  // inf or NaN
    return FloatFromBits(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return FloatFromBits(sign);
    // Subnormal: value = mantissa * 2^-24.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return FloatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

inline Float16 ToFloat16(float value) {
  const uint32_t bits = BitsFromFloat(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // inf or NaN
    return Float16{static_cast<uint16_t>(sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u))};
  }
  if (abs_bits >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return Float16{static_cast<uint16_t>(sign | 0x7c00u)};
  }
  if (abs_bits < 0x38800000u) {  // below the smallest normal: subnormal or 0
    // Adding 0.5 shifts the value so that the float adder rounds the
    // mantissa to nearest even at the float16 subnormal step (2^-24).
    const float shifted = FloatFromBits(abs_bits) + 0.5f;
    return Float16{static_cast<uint16_t>(sign | (BitsFromFloat(shifted) - 0x3f000000u))};
  }
  const uint32_t mantissa_odd = (abs_bits >> 13) & 1u;
  uint32_t rounded = abs_bits + 0xfffu + mantissa_odd;  // round to nearest even
  rounded -= 112u << 23;                                // rebias exponent
  return Float16{static_cast<uint16_t>(sign | (rounded >> 13))};
}

}  // namespace dist

#endif  // DIST_CPP_HALF_HPP_

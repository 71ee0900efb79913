#include "tests/nccl/emulation/reduction.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "dist/cpp/half.hpp"

namespace dist::emulation {
namespace {

template <typename T>
T Load(const void* base, size_t i) {
  T value;
  std::memcpy(&value, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void StoreAt(void* base, size_t i, T value) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(T), &value, sizeof(T));
}

// Integers: native arithmetic (wrapping like the GPU's), avg truncates.
template <typename T>
void ReduceIntegers(ncclRedOp_t op, const std::vector<const void*>& inputs, size_t count,
                    void* out) {
  using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  for (size_t i = 0; i < count; ++i) {
    Wide acc = static_cast<Wide>(Load<T>(inputs[0], i));
    for (size_t r = 1; r < inputs.size(); ++r) {
      const Wide v = static_cast<Wide>(Load<T>(inputs[r], i));
      switch (op) {
        case ncclSum:
        case ncclAvg:
          acc = static_cast<Wide>(static_cast<T>(acc + v));
          break;
        case ncclProd:
          acc = static_cast<Wide>(static_cast<T>(acc * v));
          break;
        case ncclMin:
          acc = std::min(acc, v);
          break;
        case ncclMax:
          acc = std::max(acc, v);
          break;
        default:
          break;
      }
    }
    if (op == ncclAvg) acc /= static_cast<Wide>(inputs.size());
    StoreAt<T>(out, i, static_cast<T>(acc));
  }
}

// Floating point through double; `to_double`/`from_double` convert T.
template <typename T, typename ToDouble, typename FromDouble>
void ReduceFloats(ncclRedOp_t op, const std::vector<const void*>& inputs, size_t count, void* out,
                  ToDouble to_double, FromDouble from_double) {
  for (size_t i = 0; i < count; ++i) {
    double acc = to_double(Load<T>(inputs[0], i));
    for (size_t r = 1; r < inputs.size(); ++r) {
      const double v = to_double(Load<T>(inputs[r], i));
      switch (op) {
        case ncclSum:
        case ncclAvg:
          acc += v;
          break;
        case ncclProd:
          acc *= v;
          break;
        case ncclMin:
          acc = std::min(acc, v);
          break;
        case ncclMax:
          acc = std::max(acc, v);
          break;
        default:
          break;
      }
    }
    if (op == ncclAvg) acc /= static_cast<double>(inputs.size());
    StoreAt<T>(out, i, from_double(acc));
  }
}

template <typename T>
void ReduceNative(ncclRedOp_t op, const std::vector<const void*>& inputs, size_t count, void* out) {
  ReduceFloats<T>(
      op, inputs, count, out, [](T v) { return static_cast<double>(v); },
      [](double v) { return static_cast<T>(v); });
}

}  // namespace

size_t ElementSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

bool KnownReduction(ncclRedOp_t op) {
  return op == ncclSum || op == ncclProd || op == ncclMin || op == ncclMax || op == ncclAvg;
}

void Reduce(ncclDataType_t type, ncclRedOp_t op, const std::vector<const void*>& inputs,
            size_t count, void* out) {
  switch (type) {
    case ncclInt8:
      ReduceIntegers<int8_t>(op, inputs, count, out);
      break;
    case ncclUint8:
      ReduceIntegers<uint8_t>(op, inputs, count, out);
      break;
    case ncclInt32:
      ReduceIntegers<int32_t>(op, inputs, count, out);
      break;
    case ncclUint32:
      ReduceIntegers<uint32_t>(op, inputs, count, out);
      break;
    case ncclInt64:
      ReduceIntegers<int64_t>(op, inputs, count, out);
      break;
    case ncclUint64:
      ReduceIntegers<uint64_t>(op, inputs, count, out);
      break;
    case ncclFloat32:
      ReduceNative<float>(op, inputs, count, out);
      break;
    case ncclFloat64:
      ReduceNative<double>(op, inputs, count, out);
      break;
    case ncclFloat16:
      ReduceFloats<Float16>(
          op, inputs, count, out, [](Float16 v) { return static_cast<double>(ToFloat(v)); },
          [](double v) { return ToFloat16(static_cast<float>(v)); });
      break;
    case ncclBfloat16:
      ReduceFloats<BFloat16>(
          op, inputs, count, out, [](BFloat16 v) { return static_cast<double>(ToFloat(v)); },
          [](double v) { return ToBFloat16(static_cast<float>(v)); });
      break;
    default:
      break;
  }
}

}  // namespace dist::emulation

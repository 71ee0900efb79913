#include "tests/nccl/host_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/half.hpp"
#include "dist/cpp/reduce.hpp"

namespace dist_nccl::testing {
namespace {

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void Store(uint8_t* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

double Tolerance(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_FLOAT16:
      return 5e-3;
    case DIST_BFLOAT16:
      return 3.2e-2;
    case DIST_FLOAT32:
      return 1e-6;
    case DIST_FLOAT64:
      return 1e-12;
    default:
      return 0;
  }
}

}  // namespace

double HostBuffer::At(size_t i) const {
  const uint8_t* p = bytes.data() + i * dist_dtype_size(dtype);
  switch (dtype) {
    case DIST_INT8:
      return Load<int8_t>(p);
    case DIST_UINT8:
      return Load<uint8_t>(p);
    case DIST_INT32:
      return Load<int32_t>(p);
    case DIST_INT64:
      return static_cast<double>(Load<int64_t>(p));
    case DIST_FLOAT16:
      return dist::ToFloat(Load<dist::Float16>(p));
    case DIST_BFLOAT16:
      return dist::ToFloat(Load<dist::BFloat16>(p));
    case DIST_FLOAT32:
      return Load<float>(p);
    case DIST_FLOAT64:
      return Load<double>(p);
    default:
      return NAN;
  }
}

void HostBuffer::Put(size_t i, double value) {
  uint8_t* p = bytes.data() + i * dist_dtype_size(dtype);
  switch (dtype) {
    case DIST_INT8:
      Store(p, static_cast<int8_t>(value));
      break;
    case DIST_UINT8:
      Store(p, static_cast<uint8_t>(value));
      break;
    case DIST_INT32:
      Store(p, static_cast<int32_t>(value));
      break;
    case DIST_INT64:
      Store(p, static_cast<int64_t>(value));
      break;
    case DIST_FLOAT16:
      Store(p, dist::ToFloat16(static_cast<float>(value)));
      break;
    case DIST_BFLOAT16:
      Store(p, dist::ToBFloat16(static_cast<float>(value)));
      break;
    case DIST_FLOAT32:
      Store(p, static_cast<float>(value));
      break;
    case DIST_FLOAT64:
      Store(p, value);
      break;
    default:
      break;
  }
}

HostBuffer Zeros(dist_dtype_t dtype, size_t count) {
  HostBuffer buffer;
  buffer.dtype = dtype;
  buffer.bytes.assign(count * dist_dtype_size(dtype), 0);
  return buffer;
}

HostBuffer Input(dist_dtype_t dtype, dist_reduce_op_t op, int rank, size_t count) {
  HostBuffer buffer = Zeros(dtype, count);
  for (size_t i = 0; i < count; ++i) {
    const double value = op == DIST_PRODUCT ? 1.0 + static_cast<double>((rank + i) % 2)
                                            : 1.0 + static_cast<double>((rank * 3 + i) % 7);
    buffer.Put(i, value);
  }
  return buffer;
}

HostBuffer Reduced(dist_dtype_t dtype, dist_reduce_op_t op, int world, size_t count) {
  HostBuffer acc = Input(dtype, op, 0, count);
  for (int rank = 1; rank < world; ++rank) {
    const HostBuffer in = Input(dtype, op, rank, count);
    dist::ReduceInto(dtype, op, acc.bytes.data(), in.bytes.data(), count);
  }
  if (op == DIST_AVG) dist::FinishAverage(dtype, acc.bytes.data(), count, world);
  return acc;
}

HostBuffer Block(const HostBuffer& buffer, size_t block, size_t count) {
  const size_t size = dist_dtype_size(buffer.dtype);
  HostBuffer out;
  out.dtype = buffer.dtype;
  out.bytes.assign(buffer.bytes.begin() + block * count * size,
                   buffer.bytes.begin() + (block + 1) * count * size);
  return out;
}

HostBuffer Concat(const std::vector<HostBuffer>& blocks) {
  HostBuffer out;
  if (!blocks.empty()) out.dtype = blocks.front().dtype;
  for (const HostBuffer& block : blocks) {
    out.bytes.insert(out.bytes.end(), block.bytes.begin(), block.bytes.end());
  }
  return out;
}

std::string Compare(const HostBuffer& actual, const HostBuffer& expected) {
  if (actual.dtype != expected.dtype || actual.count() != expected.count()) {
    return absl::StrCat("shape differs: ", actual.count(), " vs ", expected.count(), " elements");
  }
  const double tolerance = Tolerance(expected.dtype);
  for (size_t i = 0; i < expected.count(); ++i) {
    const double a = actual.At(i);
    const double e = expected.At(i);
    const bool ok =
        tolerance == 0 ? a == e : std::fabs(a - e) <= tolerance * std::max(1.0, std::fabs(e));
    if (!ok) {
      return absl::StrCat("element ", i, " is ", a, ", expected ", e);
    }
  }
  return "";
}

}  // namespace dist_nccl::testing

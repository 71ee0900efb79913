// dist conformance kit: inputs and expected results, computed independently
// of any backend.
//
// Every rank's input is a deterministic function of (seed, rank, index), so
// each rank can simulate every other rank's input and compute the expected
// result of a collective locally, in wide arithmetic (int64 / double), and
// convert it to the dtype only at the end. Inputs are chosen per dtype and
// reduce op so that sums and products are exact in the dtype (small
// integers, halves, powers of two); only AVG on floating types needs a
// tolerance, derived from the dtype's precision.
#ifndef DIST_SDK_CONFORMANCE_REFERENCE_H_
#define DIST_SDK_CONFORMANCE_REFERENCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dist/types.h"

namespace dist::conformance {

// What the input values are for: a payload that only moves (broadcast,
// gather, ...) or the operand of a reduction with `op`.
struct ValueDomain {
  dist_dtype_t dtype;
  std::optional<dist_reduce_op_t> op;  // nullopt: payload
  int world_size;                      // reductions bound their inputs by it
};

// A value in wide arithmetic: integers as int64 (bitwise ops on the two's
// complement bits), floating types as double.
struct Wide {
  int64_t i = 0;
  double f = 0.0;
};

// The value `rank` contributes at logical element `index`.
Wide InputValue(const ValueDomain& domain, uint64_t seed, int rank, uint64_t index);

// Writes `count` input elements of `rank`, logical indices
// [first_index, first_index + count), into `data` (dtype of the domain).
void FillInput(const ValueDomain& domain, uint64_t seed, int rank, uint64_t first_index,
               uint64_t count, void* data);

// The reduction over all ranks 0..world_size-1 of InputValue(rank, index),
// for logical indices [first_index, first_index + count), written as the
// dtype into `out` (count elements).
void FillExpectedReduction(const ValueDomain& domain, uint64_t seed, uint64_t first_index,
                           uint64_t count, void* out);

// Writes one wide value as element `i` of a dtype array.
void StoreElement(dist_dtype_t dtype, const Wide& value, void* data, uint64_t i);
// Reads element `i` of a dtype array (floating types as double, integers as
// int64, both filled).
Wide LoadElement(dist_dtype_t dtype, const void* data, uint64_t i);

// Compares `count` elements of `got` with `expected` (both of dtype).
// Integers must match exactly; floats within `abs_tolerance` (0: exactly).
// The error names the first differing element, both values and how many
// elements differ.
absl::Status CompareElements(dist_dtype_t dtype, const void* got, const void* expected,
                             uint64_t count, double abs_tolerance);

// The tolerance a reduction result in `domain` is compared with: 0 except for
// AVG on floating types (a backend may divide before or after summing).
double ReductionTolerance(const ValueDomain& domain);

// The unit roundoff of a floating dtype (2^-p); 0 for integers.
double Epsilon(dist_dtype_t dtype);

// A seed for one check, mixed from its parts so that checks differ.
uint64_t MixSeed(uint64_t a, uint64_t b);

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_REFERENCE_H_

// Input data and the locally computed reference for --check.
//
// Rank r's send element k holds a small integer v(r, k), so every dtype
// (float16 included) represents it and every sum is exact; the expected
// output is computed here from v alone, never from another rank's data.
#ifndef DIST_TOOLS_DISTBENCH_PATTERN_H_
#define DIST_TOOLS_DISTBENCH_PATTERN_H_

#include <cstdint>
#include <vector>

#include "tools/distbench/collectives.h"

namespace distbench {

// v(rank, k). Products use 1s and a few 2s so they never overflow.
int64_t PatternValue(const Case& c, int rank, uint64_t k);

// This rank's send buffer (send_count elements) filled with v.
std::vector<char> MakeSendData(const Case& c);

// A receive buffer filled with a value the pattern never produces, so an
// element the operation failed to write counts as wrong.
std::vector<char> MakePoisonedRecv(const Case& c);

// Elements of `recv` (recv_count elements, this rank) that differ from the
// reference. Ranks whose recv the operation leaves unspecified (reduce and
// gather off the root) count 0. Floating dtypes compare with a tolerance of
// one rounding of the dtype; integers compare exactly.
int64_t CountWrong(const Case& c, const std::vector<char>& recv);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_PATTERN_H_

// dist conformance kit: the suite's "matrix" section.
// Every declared collective, dtype, reduce op, size, root and placement.
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/validate.hpp"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

namespace {

constexpr dist_collective_t kMoving[] = {DIST_COLL_BROADCAST, DIST_COLL_ALL_GATHER,
                                         DIST_COLL_GATHER, DIST_COLL_SCATTER, DIST_COLL_ALL_TO_ALL};

bool HasInPlace(dist_collective_t coll) {
  return coll == DIST_COLL_ALL_REDUCE || coll == DIST_COLL_BROADCAST || coll == DIST_COLL_REDUCE ||
         coll == DIST_COLL_ALL_GATHER || coll == DIST_COLL_REDUCE_SCATTER;
}

std::string OpName(const std::optional<dist_reduce_op_t>& op) {
  return op.has_value() ? dist_reduce_op_name(*op) : "-";
}

}  // namespace

void Suite::CollectiveMatrix() {
  std::vector<dist_collective_t> colls(std::begin(kReducing), std::end(kReducing));
  colls.insert(colls.end(), std::begin(kMoving), std::end(kMoving));
  for (dist_collective_t coll : colls) {
    if (!Declared(coll)) continue;
    for (dist_dtype_t dtype : DeclaredDtypes()) {
      std::vector<std::optional<dist_reduce_op_t>> ops;
      if (dist::IsReducing(coll)) {
        for (int o = 0; o < DIST_REDUCE_OP_COUNT; ++o) {
          const auto op = static_cast<dist_reduce_op_t>(o);
          if ((OpsOf(coll) & (1u << op)) == 0) continue;
          if (dist::IsBitwise(op) && dist_dtype_is_floating(dtype)) continue;  // an error path
          ops.push_back(op);
        }
      } else {
        ops.push_back(std::nullopt);
      }
      const std::vector<int32_t> roots = dist::IsRooted(coll) ? Roots() : std::vector<int32_t>{0};
      for (const auto& op : ops) {
        for (uint64_t n : Sizes(coll, dtype)) {
          for (int32_t root : roots) {
            for (bool in_place : {false, true}) {
              if (in_place && !HasInPlace(coll)) continue;
              Case c{coll, dtype, op, n, root, in_place, NextSeed()};
              std::string check = dist_collective_name(coll);
              if (dist::IsRooted(coll)) absl::StrAppend(&check, " root=", root);
              absl::StrAppend(&check, in_place ? " in-place" : " out-of-place");
              absl::Status status = stuck_.empty()
                                        ? RunCase(comm_, device_, c, options_.op_timeout_ms)
                                        : absl::AbortedError(absl::StrCat("not run: ", stuck_));
              if (absl::IsDeadlineExceeded(status)) stuck_ = check + " never completed";
              Record(check, dist_dtype_name(dtype), OpName(op), absl::StrCat(n), status);
            }
          }
        }
      }
    }
  }
}

}  // namespace dist::conformance

// dist conformance kit: the suite's "subgroups" section.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::Subgroups() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const bool declared = (plugin_.caps.flags & DIST_CAP_SUBGROUPS) != 0;
  if (declared && !options_.through_core && plugin_.table->comm_split == nullptr) {
    Record("subgroups: declared DIST_CAP_SUBGROUPS has comm_split", "-", "-", "-",
           absl::InternalError("DIST_CAP_SUBGROUPS declared, but comm_split is NULL"));
  }
  if (!stuck_.empty()) {
    Record("subgroups", "-", "-", "-", absl::AbortedError("not run: " + stuck_));
    return;
  }
  // Every rank but 0 (so members are renumbered), or {0} alone.
  std::vector<int32_t> members;
  for (int32_t r = world > 1 ? 1 : 0; r < world; ++r) members.push_back(r);
  const std::string how = declared || options_.through_core || plugin_.table->comm_split != nullptr
                              ? "comm_split"
                              : "comm_create on members";
  absl::StatusOr<std::unique_ptr<Comm>> sub = comm_.Split(members, "subgroup1");
  const bool member = std::find(members.begin(), members.end(), me) != members.end();
  // One row for membership on every rank (rows line up across ranks).
  absl::Status membership = sub.status();
  if (sub.ok() && !member && *sub != nullptr) {
    membership = absl::InternalError("a non-member got a usable communicator");
  } else if (sub.ok() && member && *sub == nullptr) {
    membership = absl::InternalError("a member got no communicator");
  } else if (sub.ok() && member) {
    const int32_t want_rank = me - members.front();
    if ((*sub)->rank() != want_rank ||
        (*sub)->world_size() != static_cast<int32_t>(members.size())) {
      membership =
          absl::InternalError(absl::StrCat("rank ", (*sub)->rank(), " of ", (*sub)->world_size(),
                                           "; want ", want_rank, " of ", members.size()));
    }
  }
  Record(absl::StrCat("subgroup of ranks ", members.front(), "..", world - 1, " (", how,
                      "): members renumbered, non-members left out"),
         "-", "-", "-", membership);
  if (!sub.ok()) sub = std::unique_ptr<Comm>();
  // The same checks on every rank (members run them on the subgroup), so the
  // row count agrees everywhere.
  const dist_dtype_t dtype = PreferredDtype();
  const uint64_t seed1 = NextSeed();
  const uint64_t seed2 = NextSeed();
  auto on_sub = [&](const Case& c) -> absl::Status {
    if (!membership.ok()) return absl::AbortedError("not run: the subgroup is wrong");
    if (!member) return absl::OkStatus();
    return RunCase(**sub, device_, c, options_.op_timeout_ms);
  };
  if (Declared(DIST_COLL_ALL_REDUCE) && (OpsOf(DIST_COLL_ALL_REDUCE) & (1u << DIST_SUM)) != 0) {
    Record("subgroup: all_reduce over members only", dist_dtype_name(dtype), "sum", "1023",
           on_sub(Case{DIST_COLL_ALL_REDUCE, dtype, DIST_SUM, 1023, 0, false, seed1}));
  }
  if (Declared(DIST_COLL_BROADCAST)) {
    Record("subgroup: broadcast from the subgroup's rank 0", dist_dtype_name(dtype), "-", "1023",
           on_sub(Case{DIST_COLL_BROADCAST, dtype, std::nullopt, 1023, 0, false, seed2}));
  }
  sub->reset();  // subgroups go before the parent is used again
  // The parent still works after the subgroup is gone.
  if (Declared(DIST_COLL_ALL_REDUCE) && (OpsOf(DIST_COLL_ALL_REDUCE) & (1u << DIST_SUM)) != 0) {
    Case c{DIST_COLL_ALL_REDUCE, dtype, DIST_SUM, 7, 0, false, NextSeed()};
    Record("subgroup: parent still works afterwards", dist_dtype_name(dtype), "sum", "7",
           RunCase(comm_, device_, c, options_.op_timeout_ms));
  }
}

}  // namespace dist::conformance

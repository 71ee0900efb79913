// Checks the collectives that run hierarchically on several hosts
// (core/host_hierarchy.h) against references computed here, and against the
// same calls on a flat group of the same ranks (dist_new_group of every
// rank: subgroups always run flat), bit for bit where the reduction order
// cannot matter (integers, min and max).
//
//   hierarchy_check
//
// Prints "rank R of W: hierarchy checks correct" and exits 0, or prints
// what was wrong and exits 1.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/dist.hpp"

namespace {

int rank = -1;
int world = 0;
int failures = 0;

void Fail(const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  ++failures;
}

bool Ok(const absl::Status& status, const std::string& what) {
  if (status.ok()) return true;
  Fail(absl::StrCat(what, " failed: ", status.message()));
  return false;
}

template <typename T>
void ExpectEqual(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (!(got[i] == want[i])) {
      Fail(absl::StrCat(what, ": element ", i, " is ", got[i], ", expected ", want[i]));
      return;
    }
  }
}

int32_t Value(int r, size_t i) { return static_cast<int32_t>(r * 1000 + (i % 977)) - 500; }

void CheckAllReduce(dist::ProcessGroup& group, dist::ProcessGroup& flat, size_t n) {
  const std::string size = absl::StrCat(" (", n, " elements)");
  // int32 sum, out of place and in place, against the reference and flat.
  std::vector<int32_t> mine(n), got(n), in_place(n), flat_got(n), want(n, 0);
  for (size_t i = 0; i < n; ++i) {
    mine[i] = Value(rank, i);
    for (int r = 0; r < world; ++r) want[i] += Value(r, i);
  }
  in_place = mine;
  if (Ok(group.AllReduce(dist::View(mine), dist::View(got), DIST_SUM), "all_reduce int32 sum")) {
    ExpectEqual(got, want, "all_reduce int32 sum" + size);
  }
  if (Ok(group.AllReduce(dist::View(in_place), dist::View(in_place), DIST_SUM),
         "all_reduce int32 sum in place")) {
    ExpectEqual(in_place, want, "all_reduce int32 sum in place" + size);
  }
  if (Ok(flat.AllReduce(dist::View(mine), dist::View(flat_got), DIST_SUM), "flat all_reduce")) {
    ExpectEqual(got, flat_got, "hierarchical against flat int32 sum" + size);
  }
  // float max and min: exact, and equal to flat's.
  std::vector<float> values(n), max(n), min(n), flat_max(n);
  std::vector<float> want_max(n), want_min(n);
  for (size_t i = 0; i < n; ++i) {
    values[i] = static_cast<float>(((rank * 7919 + i * 31) % 1009)) * 0.37f;
    want_max[i] = -1e30f;
    want_min[i] = 1e30f;
    for (int r = 0; r < world; ++r) {
      const float v = static_cast<float>(((r * 7919 + i * 31) % 1009)) * 0.37f;
      want_max[i] = std::max(want_max[i], v);
      want_min[i] = std::min(want_min[i], v);
    }
  }
  if (Ok(group.AllReduce(dist::View(values), dist::View(max), DIST_MAX), "all_reduce max")) {
    ExpectEqual(max, want_max, "all_reduce float max" + size);
  }
  if (Ok(group.AllReduce(dist::View(values), dist::View(min), DIST_MIN), "all_reduce min")) {
    ExpectEqual(min, want_min, "all_reduce float min" + size);
  }
  if (Ok(flat.AllReduce(dist::View(values), dist::View(flat_max), DIST_MAX), "flat max")) {
    ExpectEqual(max, flat_max, "hierarchical against flat float max" + size);
  }
  // float sum: within rounding of a double reference (another order).
  std::vector<float> sum(n);
  if (Ok(group.AllReduce(dist::View(values), dist::View(sum), DIST_SUM), "all_reduce float sum")) {
    for (size_t i = 0; i < n; ++i) {
      double reference = 0;
      for (int r = 0; r < world; ++r) {
        reference += static_cast<float>(((r * 7919 + i * 31) % 1009)) * 0.37f;
      }
      if (std::fabs(sum[i] - reference) > 1e-4 * std::max(1.0, std::fabs(reference))) {
        Fail(absl::StrCat("all_reduce float sum", size, ": element ", i, " is ", sum[i],
                          ", expected ", reference));
        break;
      }
    }
  }
  // The average takes the flat path; it must still be right.
  std::vector<double> ones(n, rank + 1.0), mean(n);
  if (Ok(group.AllReduce(dist::View(ones), dist::View(mean), DIST_AVG), "all_reduce avg")) {
    ExpectEqual(mean, std::vector<double>(n, (world + 1) / 2.0), "all_reduce avg" + size);
  }
}

void CheckBroadcast(dist::ProcessGroup& group, size_t n) {
  // Every root: leaders and the others, on every host.
  for (int root = 0; root < world; ++root) {
    std::vector<int64_t> send(n), recv(n, -1), want(n);
    for (size_t i = 0; i < n; ++i) want[i] = root * 1000003 + static_cast<int64_t>(i);
    if (rank == root) send = want;
    const std::string what = absl::StrCat("broadcast from ", root, " (", n, " elements)");
    if (Ok(group.Broadcast(dist::View(send), dist::View(recv), root), what)) {
      ExpectEqual(recv, want, what);
    }
    std::vector<int64_t> in_place = rank == root ? want : std::vector<int64_t>(n, -1);
    if (Ok(group.Broadcast(dist::View(in_place), dist::View(in_place), root), what + " in place")) {
      ExpectEqual(in_place, want, what + " in place");
    }
  }
}

void CheckAllGather(dist::ProcessGroup& group, dist::ProcessGroup& flat, size_t n) {
  std::vector<int32_t> send(n), recv(n * world, -1), flat_recv(n * world), want(n * world);
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < n; ++i) want[r * n + i] = Value(r, i) * 3 + r;
  }
  for (size_t i = 0; i < n; ++i) send[i] = want[rank * n + i];
  const std::string what = absl::StrCat("all_gather (", n, " elements a rank)");
  if (Ok(group.AllGather(dist::View(send), dist::View(recv)), what)) ExpectEqual(recv, want, what);
  if (Ok(flat.AllGather(dist::View(send), dist::View(flat_recv)), "flat all_gather")) {
    ExpectEqual(recv, flat_recv, "hierarchical against flat " + what);
  }
  // In place: this rank's block already sits in recv.
  std::vector<int32_t> in_place(n * world, -1);
  std::copy(send.begin(), send.end(), in_place.begin() + rank * n);
  dist_buffer_t block = dist::View(in_place);
  block.data = in_place.data() + rank * n;
  block.count = n;
  if (Ok(group.AllGather(block, dist::View(in_place)), what + " in place")) {
    ExpectEqual(in_place, want, what + " in place");
  }
}

// The last rank arrives late: nobody may leave the barrier before it came.
void CheckBarrier(dist::ProcessGroup& group) {
  constexpr auto kLate = std::chrono::milliseconds(400);
  const auto start = std::chrono::steady_clock::now();
  if (rank == world - 1) std::this_thread::sleep_for(kLate);
  if (!Ok(group.Barrier(), "barrier")) return;
  const auto waited = std::chrono::steady_clock::now() - start;
  if (waited < kLate / 2) {
    Fail(absl::StrCat("barrier let rank ", rank, " go after ",
                      std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
                      " ms, before rank ", world - 1, " (", kLate.count(), " ms late) arrived"));
  }
}

}  // namespace

int main() {
  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init();
  if (!group.ok()) {
    std::fprintf(stderr, "hierarchy_check: %s\n", std::string(group.status().message()).c_str());
    return 1;
  }
  rank = group->rank();
  world = group->world_size();
  std::vector<int32_t> everyone(world);
  for (int r = 0; r < world; ++r) everyone[r] = r;
  absl::StatusOr<dist::ProcessGroup> flat = group->NewGroup(everyone);
  if (!flat.ok()) {
    std::fprintf(stderr, "hierarchy_check: new_group: %s\n",
                 std::string(flat.status().message()).c_str());
    return 1;
  }
  // 300000 int32 split evenly over 2 and 4 ranks a host: large all-reduces run on the rails.
  // 20000: through the leaders (64 KiB to 1 MiB).
  for (size_t n :
       {size_t{1}, size_t{5}, size_t{1000}, size_t{20000}, size_t{300001}, size_t{300000}}) {
    CheckAllReduce(*group, *flat, n);
    CheckBroadcast(*group, n);
    CheckAllGather(*group, *flat, n);
  }
  CheckBarrier(*group);
  if (failures > 0) return 1;
  std::printf("rank %d of %d: hierarchy checks correct\n", rank, world);
  return 0;
}

// dist conformance kit: the suite's "counts" section: dist.h's collectives
// with a count per rank (dist_all_to_all_v, dist_all_gather_v,
// dist_reduce_scatter_v) and dist_split_group, with uneven and zero
// counts. The core builds them from every backend's operations, so they
// are checked through the core only; a raw table records one skip.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"
#include "dist/dist.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {
namespace {

// What rank i sends rank j in all_to_all_v: (i + 2j) % 3 elements, so some
// pairs send none and the counts differ both ways.
uint64_t Count(int i, int j) { return static_cast<uint64_t>((i + 2 * j) % 3); }

// Element k of the block from rank i to rank j, as bytes: every byte of it
// says who sent it to whom and where (moved data is compared bitwise).
void FillElement(unsigned char* element, size_t size, int i, int j, uint64_t k) {
  for (size_t b = 0; b < size; ++b) {
    element[b] = static_cast<unsigned char>(i * 31 + j * 7 + k * 3 + b);
  }
}

absl::Status AllToAllV(dist_process_group_t* group, dist_dtype_t dtype, int rank, int world) {
  const size_t size = dist_dtype_size(dtype);
  std::vector<uint64_t> send_counts(world), recv_counts(world);
  for (int j = 0; j < world; ++j) send_counts[j] = Count(rank, j);
  for (int i = 0; i < world; ++i) recv_counts[i] = Count(i, rank);
  const uint64_t send_total = std::accumulate(send_counts.begin(), send_counts.end(), uint64_t{0});
  const uint64_t recv_total = std::accumulate(recv_counts.begin(), recv_counts.end(), uint64_t{0});
  std::vector<unsigned char> send(send_total * size), recv(recv_total * size, 0xEE),
      want(recv_total * size);
  uint64_t at = 0;
  for (int j = 0; j < world; ++j) {
    for (uint64_t k = 0; k < send_counts[j]; ++k, ++at)
      FillElement(&send[at * size], size, rank, j, k);
  }
  at = 0;
  for (int i = 0; i < world; ++i) {
    for (uint64_t k = 0; k < recv_counts[i]; ++k, ++at)
      FillElement(&want[at * size], size, i, rank, k);
  }
  dist_buffer_t s = dist_make_buffer(send.data(), send_total, dtype, dist_cpu());
  dist_buffer_t r = dist_make_buffer(recv.data(), recv_total, dtype, dist_cpu());
  DIST_RETURN_IF_ERROR(TakeError(dist_all_to_all_v(group, &s, send_counts.data(), nullptr, &r,
                                                   recv_counts.data(), nullptr, nullptr)));
  return recv == want ? absl::OkStatus()
                      : absl::InternalError("all_to_all_v: a block holds the wrong bytes");
}

absl::Status AllGatherV(dist_process_group_t* group, dist_dtype_t dtype, int rank, int world) {
  // Rank r gives r % 3 elements (rank 0 none); rank 1's block is displaced
  // by 2 elements, which must stay untouched.
  const size_t size = dist_dtype_size(dtype);
  std::vector<uint64_t> counts(world), displs(world);
  uint64_t end = 0;
  for (int r = 0; r < world; ++r) {
    counts[r] = static_cast<uint64_t>(r % 3);
    displs[r] = end + (r == 1 ? 2 : 0);
    end = displs[r] + counts[r];
  }
  std::vector<unsigned char> mine(counts[rank] * size), all(end * size, 0xEE),
      want(end * size, 0xEE);
  for (uint64_t k = 0; k < counts[rank]; ++k) FillElement(&mine[k * size], size, rank, 0, k);
  for (int r = 0; r < world; ++r) {
    for (uint64_t k = 0; k < counts[r]; ++k)
      FillElement(&want[(displs[r] + k) * size], size, r, 0, k);
  }
  dist_buffer_t s = dist_make_buffer(mine.data(), counts[rank], dtype, dist_cpu());
  dist_buffer_t g = dist_make_buffer(all.data(), end, dtype, dist_cpu());
  DIST_RETURN_IF_ERROR(
      TakeError(dist_all_gather_v(group, &s, &g, counts.data(), displs.data(), nullptr)));
  return all == want
             ? absl::OkStatus()
             : absl::InternalError("all_gather_v: a block (or the gap) holds the wrong bytes");
}

absl::Status ReduceScatterV(dist_process_group_t* group, int rank, int world) {
  // Element k of every rank's send is k + rank; rank r keeps block r
  // (r + 1 elements) of the sum, k * W + W(W-1)/2.
  std::vector<uint64_t> counts(world);
  std::iota(counts.begin(), counts.end(), 1);
  const uint64_t total = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
  std::vector<int32_t> send(total), got(counts[rank], -1);
  for (uint64_t k = 0; k < total; ++k) send[k] = static_cast<int32_t>(k) + rank;
  dist_buffer_t s = dist_make_buffer(send.data(), total, DIST_INT32, dist_cpu());
  dist_buffer_t r = dist_make_buffer(got.data(), got.size(), DIST_INT32, dist_cpu());
  DIST_RETURN_IF_ERROR(
      TakeError(dist_reduce_scatter_v(group, &s, &r, counts.data(), DIST_SUM, nullptr)));
  const uint64_t first = std::accumulate(counts.begin(), counts.begin() + rank, uint64_t{0});
  for (uint64_t k = 0; k < got.size(); ++k) {
    const int64_t want = static_cast<int64_t>(first + k) * world + world * (world - 1) / 2;
    if (got[k] != want) {
      return absl::InternalError(
          absl::StrCat("reduce_scatter_v: element ", k, " is ", got[k], ", want ", want));
    }
  }
  return absl::OkStatus();
}

absl::Status SplitByParity(dist_process_group_t* group, int rank, int world) {
  dist_process_group_t* half = nullptr;
  DIST_RETURN_IF_ERROR(TakeError(dist_split_group(group, rank % 2, rank, &half)));
  const int want_size = (world - rank % 2 + 1) / 2;
  absl::Status status;
  if (half == nullptr) {
    status = absl::InternalError("split_group: a rank with a colour got no group");
  } else if (dist_rank(half) != rank / 2 || dist_world_size(half) != want_size) {
    status = absl::InternalError(absl::StrCat("split_group: rank ", dist_rank(half), " of ",
                                              dist_world_size(half), ", want ", rank / 2, " of ",
                                              want_size));
  } else {
    status = TakeError(dist_barrier(half, nullptr));
  }
  dist_destroy(half);
  return status;
}

// Keys that reverse the parent's order: member i of each half is the
// half's (size - 1 - i)th parent rank, which an all_gather of parent ranks
// shows.
absl::Status SplitReversed(dist_process_group_t* group, int rank, int world) {
  dist_process_group_t* half = nullptr;
  DIST_RETURN_IF_ERROR(TakeError(dist_split_group(group, rank % 2, world - rank, &half)));
  if (half == nullptr) return absl::InternalError("split_group: a rank with a colour got no group");
  const int size = dist_world_size(half);
  const int want_size = (world - rank % 2 + 1) / 2;
  absl::Status status;
  std::vector<int32_t> order(std::max(size, 1), -1);
  int32_t mine = rank;
  const dist_buffer_t send = dist_make_buffer(&mine, 1, DIST_INT32, dist_cpu());
  const dist_buffer_t recv = dist_make_buffer(order.data(), order.size(), DIST_INT32, dist_cpu());
  if (size != want_size) {
    status = absl::InternalError(absl::StrCat("split_group: ", size, " ranks, want ", want_size));
  } else {
    status = TakeError(dist_all_gather(half, &send, &recv, nullptr));
  }
  for (int i = 0; status.ok() && i < size; ++i) {
    // The half's parent ranks in descending order: parity + 2 * (size - 1 - i).
    const int want = rank % 2 + 2 * (size - 1 - i);
    if (order[i] != want) {
      status = absl::InternalError(absl::StrCat("split_group with reversing keys: member ", i,
                                                " is parent rank ", order[i], ", want ", want));
    }
  }
  dist_destroy(half);
  return status;
}

}  // namespace

void Suite::PerRankCounts() {
  dist_process_group_t* group = comm_.core_group();
  if (group == nullptr) {
    Skip("counts", "dist.h's per-rank-count collectives are the core's: checked through the core");
    return;
  }
  if (device_.type != DIST_DEVICE_CPU) {
    Skip("counts", "the per-rank-count collectives take host buffers in this version");
    return;
  }
  if (!stuck_.empty()) {
    Record("counts", "-", "-", "-", absl::AbortedError("not run: " + stuck_));
    return;
  }
  const int rank = comm_.rank();
  const int world = comm_.world_size();
  const dist_dtype_t dtype = PreferredDtype();
  Record("all_to_all_v: uneven and zero counts", dist_dtype_name(dtype), "-", "(i+2j)%3",
         AllToAllV(group, dtype, rank, world));
  Record("all_gather_v: uneven and zero counts, displaced", dist_dtype_name(dtype), "-", "r%3",
         AllGatherV(group, dtype, rank, world));
  if (DeclaredDtype(DIST_INT32) && Declared(DIST_COLL_ALL_REDUCE) &&
      (OpsOf(DIST_COLL_ALL_REDUCE) & (1u << DIST_SUM)) != 0) {
    Record("reduce_scatter_v: uneven counts", "int32", "sum", "r+1",
           ReduceScatterV(group, rank, world));
  } else {
    Skip("reduce_scatter_v", "needs all_reduce sum on int32");
  }
  Record("split_group: by parity, numbered by key", "-", "-", "-",
         SplitByParity(group, rank, world));
  if (Declared(DIST_COLL_ALL_GATHER) && DeclaredDtype(DIST_INT32)) {
    Record("split_group: keys that reverse the order", "-", "-", "-",
           SplitReversed(group, rank, world));
  } else {
    Skip("split_group: keys that reverse the order", "needs all_gather on int32");
  }
}

}  // namespace dist::conformance

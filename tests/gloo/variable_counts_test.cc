// The gloo plugin's run_v (backend ABI 1.5): all_to_all_v on gloo::alltoallv
// and all_gather_v on gloo::allgatherv, called through the plugin's table
// on real ranks (real Gloo, TCP on loopback). Every result is compared with
// blocks computed here from who sent what to whom; uneven, zero and
// displaced counts, overlapping buffers, a rank that moves nothing, order
// with queued work, and ranks that disagree on the counts (an error, not a
// crash). reduce_scatter_v is handed back to the core (UNIMPLEMENTED).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/gloo/gloo_suite.h"

namespace dist_test {
namespace {

constexpr int64_t kSentinel = -7;

struct Counts {
  std::vector<uint64_t> send_counts, send_displs, recv_counts, recv_displs;
};

dist_error_t* RunV(dist_backend_comm_t* comm, dist_collective_t kind, const dist_op_args_t& a,
                   const Counts& c, int64_t timeout_ms = 60000) {
  auto data = [](const std::vector<uint64_t>& v) { return v.empty() ? nullptr : v.data(); };
  const dist_op_counts_t counts{sizeof(dist_op_counts_t), data(c.send_counts), data(c.send_displs),
                                data(c.recv_counts), data(c.recv_displs)};
  return Plugin()->run_v(comm, kind, &a, &counts, timeout_ms);
}

std::vector<uint64_t> PackedDispls(const std::vector<uint64_t>& counts) {
  std::vector<uint64_t> displs(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), uint64_t{0});
  return displs;
}

// Where the last block ends, in elements.
uint64_t End(const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs) {
  uint64_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r) end = std::max(end, displs[r] + counts[r]);
  return end;
}

// Element k of the block rank i sends rank j.
int64_t Value(int i, int j, uint64_t k) {
  return 1000000 * (i + 1) + 1000 * j + static_cast<int64_t>(k);
}

// One all_to_all_v where rank i sends rank j count(i, j) elements of
// int64, block j of send at send_displ(j) and block i of recv at
// recv_displ(i) (elements of a buffer of `span`); checks every block and
// that the elements between blocks kept kSentinel.
template <typename CountFn>
void AllToAllV(int rank, int world, dist_backend_comm_t* comm, CountFn count, bool gaps) {
  Counts c;
  for (int j = 0; j < world; ++j) c.send_counts.push_back(count(rank, j));
  for (int i = 0; i < world; ++i) c.recv_counts.push_back(count(i, rank));
  c.send_displs = PackedDispls(c.send_counts);
  c.recv_displs = PackedDispls(c.recv_counts);
  if (gaps) {
    // send: blocks in reverse rank order, one element apart; recv: blocks in
    // rank order with one element before each.
    uint64_t at = 0;
    for (int j = world - 1; j >= 0; --j) {
      c.send_displs[j] = at;
      at += c.send_counts[j] + 1;
    }
    for (int i = 0; i < world; ++i) c.recv_displs[i] = c.recv_displs[i] + i + 1;
  }
  std::vector<int64_t> send(End(c.send_counts, c.send_displs) + 1, kSentinel);
  std::vector<int64_t> recv(End(c.recv_counts, c.recv_displs) + 1, kSentinel);
  std::vector<int64_t> want = recv;
  for (int j = 0; j < world; ++j) {
    for (uint64_t k = 0; k < c.send_counts[j]; ++k) send[c.send_displs[j] + k] = Value(rank, j, k);
  }
  for (int i = 0; i < world; ++i) {
    for (uint64_t k = 0; k < c.recv_counts[i]; ++k) want[c.recv_displs[i] + k] = Value(i, rank, k);
  }
  dist_op_args_t a = Args();
  a.send = Buffer(send.data(), send.size(), DIST_INT64);
  a.recv = Buffer(recv.data(), recv.size(), DIST_INT64);
  RANK_OK(rank, RunV(comm, DIST_COLL_ALL_TO_ALL, a, c));
  RANK_CHECK(rank, recv == want);
}

int AllToAllVRank(int rank, int world, const std::string& dir) {
  const dist_backend_plugin_t* p = Plugin();
  RANK_CHECK(rank, p->run_v != nullptr);
  dist_store_t* store = OpenStore(dir + "/store");
  dist_backend_comm_t* comm = nullptr;
  RANK_OK(rank, CreateComm(store, rank, world, CommOptions{}, &comm));

  // Uneven counts with zeros, both ways different; packed, then displaced.
  auto uneven = [](int i, int j) { return static_cast<uint64_t>((i + 2 * j) % 3); };
  AllToAllV(rank, world, comm, uneven, false);
  AllToAllV(rank, world, comm, uneven, true);
  // Larger blocks (many TCP writes), still uneven.
  AllToAllV(
      rank, world, comm, [](int i, int j) { return static_cast<uint64_t>(5000 * (i + 1) + j); },
      false);

  {  // Rank 1 moves nothing and passes NULL buffers.
    auto without_1 = [](int i, int j) -> uint64_t {
      return i == 1 || j == 1 ? 0 : static_cast<uint64_t>(i * j % 3 + 1);
    };
    if (rank != 1) {
      AllToAllV(rank, world, comm, without_1, false);
    } else {
      Counts c{std::vector<uint64_t>(world, 0), std::vector<uint64_t>(world, 0),
               std::vector<uint64_t>(world, 0), std::vector<uint64_t>(world, 0)};
      dist_op_args_t a = Args();
      a.send = Buffer(nullptr, 0, DIST_INT64);
      a.recv = Buffer(nullptr, 0, DIST_INT64);
      RANK_OK(rank, RunV(comm, DIST_COLL_ALL_TO_ALL, a, c));
    }
  }
  {  // Nothing at all anywhere.
    Counts c{std::vector<uint64_t>(world, 0), std::vector<uint64_t>(world, 0),
             std::vector<uint64_t>(world, 0), std::vector<uint64_t>(world, 0)};
    dist_op_args_t a = Args();
    a.send = Buffer(nullptr, 0, DIST_INT64);
    a.recv = Buffer(nullptr, 0, DIST_INT64);
    RANK_OK(rank, RunV(comm, DIST_COLL_ALL_TO_ALL, a, c));
  }
  {  // One buffer as both send and recv (symmetric counts): block j is
     // replaced by what rank j sent.
    Counts c;
    for (int j = 0; j < world; ++j) c.send_counts.push_back((rank + j) % 3 + 1);
    c.recv_counts = c.send_counts;
    c.send_displs = c.recv_displs = PackedDispls(c.send_counts);
    std::vector<int64_t> buffer(c.send_displs.back() + c.send_counts.back());
    std::vector<int64_t> want(buffer.size());
    for (int j = 0; j < world; ++j) {
      for (uint64_t k = 0; k < c.send_counts[j]; ++k) {
        buffer[c.send_displs[j] + k] = Value(rank, j, k);
        want[c.send_displs[j] + k] = Value(j, rank, k);
      }
    }
    dist_op_args_t a = Args();
    a.send = a.recv = Buffer(buffer.data(), buffer.size(), DIST_INT64);
    RANK_OK(rank, RunV(comm, DIST_COLL_ALL_TO_ALL, a, c));
    RANK_CHECK(rank, buffer == want);
  }
  {  // In order with work queued before it: an all_reduce issued but not
     // yet waited for runs first.
    std::vector<int32_t> in(50000, rank + 1), sum(50000, 0);
    dist_op_args_t r = Args();
    r.send = Buffer(in.data(), in.size(), DIST_INT32);
    r.recv = Buffer(sum.data(), sum.size(), DIST_INT32);
    r.op = DIST_SUM;
    dist_backend_work_t* work = nullptr;
    RANK_OK(rank, p->all_reduce(comm, &r, &work));
    AllToAllV(rank, world, comm, uneven, true);
    RANK_OK(rank, p->work_wait(work, 60000));
    p->work_destroy(work);
    for (int32_t v : sum) RANK_CHECK(rank, v == world * (world + 1) / 2);
  }
  {  // reduce_scatter_v goes back to the core, on every rank alike.
    std::vector<int32_t> in(world, 1), out(1);
    Counts c{
        {}, {}, std::vector<uint64_t>(world, 1), PackedDispls(std::vector<uint64_t>(world, 1))};
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), in.size(), DIST_INT32);
    a.recv = Buffer(out.data(), 1, DIST_INT32);
    a.op = DIST_SUM;
    dist_error_t* e = RunV(comm, DIST_COLL_REDUCE_SCATTER, a, c);
    RANK_CHECK(rank, dist_error_code(e) == DIST_UNIMPLEMENTED);
    dist_error_destroy(e);
  }
  {  // Arguments refused on every rank before anything moves: a block past
     // its buffer; a CUDA buffer (INVALID_ARGUMENT, never UNIMPLEMENTED,
     // which would send this rank alone to the core's construction).
    std::vector<int64_t> send(world), recv(world);
    Counts c{std::vector<uint64_t>(world, 1), PackedDispls(std::vector<uint64_t>(world, 1)),
             std::vector<uint64_t>(world, 1), PackedDispls(std::vector<uint64_t>(world, 1))};
    c.recv_displs.back() = world;
    dist_op_args_t a = Args();
    a.send = Buffer(send.data(), send.size(), DIST_INT64);
    a.recv = Buffer(recv.data(), recv.size(), DIST_INT64);
    dist_error_t* e = RunV(comm, DIST_COLL_ALL_TO_ALL, a, c);
    RANK_CHECK(rank, dist_error_code(e) == DIST_INVALID_ARGUMENT);
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "ends past the recv buffer"));
    dist_error_destroy(e);
    c.recv_displs = c.send_displs;
    a.recv.device.type = DIST_DEVICE_CUDA;
    e = RunV(comm, DIST_COLL_ALL_TO_ALL, a, c);
    RANK_CHECK(rank, dist_error_code(e) == DIST_INVALID_ARGUMENT);
    dist_error_destroy(e);
  }
  if (world >= 3) {  // Ranks 0 and 1 disagree: rank 0 sends rank 1 three
                     // elements, rank 1 expects two. An error on both, the
                     // others unharmed, and no process killed by Gloo.
    auto said_by = [rank](int i, int j) -> uint64_t {
      if (i == 0 && j == 1) return rank == 1 ? 2 : 3;
      return static_cast<uint64_t>((i + 2 * j) % 3);
    };
    Counts c;
    for (int j = 0; j < world; ++j) c.send_counts.push_back(said_by(rank, j));
    for (int i = 0; i < world; ++i) c.recv_counts.push_back(said_by(i, rank));
    c.send_displs = PackedDispls(c.send_counts);
    c.recv_displs = PackedDispls(c.recv_counts);
    std::vector<int64_t> send(c.send_displs.back() + c.send_counts.back());
    std::vector<int64_t> recv(c.recv_displs.back() + c.recv_counts.back(), kSentinel);
    std::vector<int64_t> want(recv.size(), kSentinel);
    for (int j = 0; j < world; ++j) {
      for (uint64_t k = 0; k < c.send_counts[j]; ++k)
        send[c.send_displs[j] + k] = Value(rank, j, k);
    }
    for (int i = 0; i < world; ++i) {
      for (uint64_t k = 0; k < c.recv_counts[i]; ++k)
        want[c.recv_displs[i] + k] = Value(i, rank, k);
    }
    dist_op_args_t a = Args();
    a.send = Buffer(send.data(), send.size(), DIST_INT64);
    a.recv = Buffer(recv.data(), recv.size(), DIST_INT64);
    dist_error_t* e = RunV(comm, DIST_COLL_ALL_TO_ALL, a, c);
    if (rank <= 1) {
      RANK_CHECK(rank, dist_error_code(e) == DIST_INVALID_ARGUMENT);
      const std::string message = dist_error_message(e);
      RANK_CHECK(rank, absl::StrContains(message, "all_to_all_v"));
      RANK_CHECK(rank, absl::StrContains(message, rank == 0 ? "sends rank 1 3 elements"
                                                            : "expects 2 elements from rank 0"));
      RANK_CHECK(rank,
                 std::all_of(recv.begin(), recv.end(), [](int64_t v) { return v == kSentinel; }));
      dist_error_destroy(e);
    } else {
      RANK_CHECK(rank, e == nullptr);
      RANK_CHECK(rank, recv == want);
    }
    // The communicator still works.
    AllToAllV(rank, world, comm, uneven, false);
  }
  p->comm_destroy(comm);
  store->release(store->ctx);
  return 0;
}

// all_gather_v of 2-byte elements (bfloat16 bit patterns, moved as bytes): rank r gives count(r)
// elements; block r of recv at displs[r]; elements outside the blocks keep their sentinel.
void AllGatherV(int rank, int world, dist_backend_comm_t* comm, const std::vector<uint64_t>& counts,
                const std::vector<uint64_t>& displs, bool in_place) {
  auto value = [](int r, uint64_t k) { return static_cast<uint16_t>(5000 * r + k); };
  const uint64_t end = End(counts, displs);
  std::vector<uint16_t> recv(end + 1, 0xFFFF), want(end + 1, 0xFFFF);
  std::vector<uint16_t> mine(counts[rank]);
  for (uint64_t k = 0; k < counts[rank]; ++k) mine[k] = value(rank, k);
  for (int r = 0; r < world; ++r) {
    for (uint64_t k = 0; k < counts[r]; ++k) want[displs[r] + k] = value(r, k);
  }
  dist_op_args_t a = Args();
  a.recv = Buffer(recv.data(), recv.size(), DIST_BFLOAT16);
  if (in_place) {
    std::copy(mine.begin(), mine.end(), recv.begin() + displs[rank]);
    a.send = Buffer(recv.data() + displs[rank], counts[rank], DIST_BFLOAT16);
  } else {
    a.send = Buffer(mine.data(), mine.size(), DIST_BFLOAT16);
  }
  RANK_OK(rank, RunV(comm, DIST_COLL_ALL_GATHER, a, Counts{{}, {}, counts, displs}));
  RANK_CHECK(rank, recv == want);
}

int AllGatherVRank(int rank, int world, const std::string& dir) {
  dist_store_t* store = OpenStore(dir + "/store");
  dist_backend_comm_t* comm = nullptr;
  RANK_OK(rank, CreateComm(store, rank, world, CommOptions{}, &comm));
  std::vector<uint64_t> counts(world);
  // Rank 2 gives none.
  for (int r = 0; r < world; ++r) counts[r] = static_cast<uint64_t>((r + 1) % 3 * 700);
  const std::vector<uint64_t> packed = PackedDispls(counts);
  AllGatherV(rank, world, comm, counts, packed, false);
  AllGatherV(rank, world, comm, counts, packed, true);
  // Displaced: reverse rank order with gaps (through a packed copy).
  std::vector<uint64_t> displaced(world);
  uint64_t at = 3;
  for (int r = world - 1; r >= 0; --r) {
    displaced[r] = at;
    at += counts[r] + 2;
  }
  AllGatherV(rank, world, comm, counts, displaced, false);
  AllGatherV(rank, world, comm, counts, displaced, true);
  // Nothing from anyone: no Gloo call, NULL buffers.
  dist_op_args_t a = Args();
  a.send = Buffer(nullptr, 0, DIST_BFLOAT16);
  a.recv = Buffer(nullptr, 0, DIST_BFLOAT16);
  RANK_OK(rank,
          RunV(comm, DIST_COLL_ALL_GATHER, a,
               Counts{{}, {}, std::vector<uint64_t>(world, 0), std::vector<uint64_t>(world, 0)}));
  if (world >= 3) {
    // Rank 2 thinks rank 1 gives 2 elements, rank 1 gives 1: the counts go
    // into Gloo's tag, so the ranks time out with an error, within the
    // operation's timeout, instead of overrunning a receive.
    std::vector<uint64_t> said(world, 1);
    if (rank == 2) said[1] = 2;
    std::vector<uint16_t> mine(1, 5), all(world + 1);
    dist_op_args_t m = Args();
    m.send = Buffer(mine.data(), 1, DIST_BFLOAT16);
    m.recv = Buffer(all.data(), all.size(), DIST_BFLOAT16);
    m.timeout_ms = 2000;
    const absl::Time start = absl::Now();
    dist_error_t* e = RunV(comm, DIST_COLL_ALL_GATHER, m, Counts{{}, {}, said, PackedDispls(said)});
    RANK_CHECK(rank, e != nullptr);
    RANK_CHECK(rank, absl::Now() - start < absl::Seconds(4));
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "all_gather_v"));
    dist_error_destroy(e);
  }
  Plugin()->comm_destroy(comm);
  store->release(store->ctx);
  return 0;
}

TEST(GlooVariableCounts, AllToAllVOnFourRanks) {
  const std::string dir = TempDir("alltoallv");
  for (const RankResult& r :
       RunRanks(4, absl::Seconds(90), [&](int rank) { return AllToAllVRank(rank, 4, dir); })) {
    EXPECT_TRUE(r.ok()) << r.Describe();
  }
}

TEST(GlooVariableCounts, AllGatherVOnThreeRanks) {
  const std::string dir = TempDir("allgatherv");
  for (const RankResult& r :
       RunRanks(3, absl::Seconds(90), [&](int rank) { return AllGatherVRank(rank, 3, dir); })) {
    EXPECT_TRUE(r.ok()) << r.Describe();
  }
}

TEST(GlooVariableCounts, SingleRank) {
  const std::string a2a = TempDir("single-alltoallv");
  const std::string ag = TempDir("single-allgatherv");
  for (const RankResult& r : RunRanks(1, absl::Seconds(60), [&](int rank) {
         AllToAllVRank(rank, 1, a2a);
         return AllGatherVRank(rank, 1, ag);
       })) {
    EXPECT_TRUE(r.ok()) << r.Describe();
  }
}

}  // namespace
}  // namespace dist_test

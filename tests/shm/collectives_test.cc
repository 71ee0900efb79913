// Every collective and send/recv of the shm backend, with real forked
// processes, checked element by element against values computed here.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_suite.h"
#include "tests/shm/values.h"

namespace dist_test {
namespace {

constexpr int kWorld = 4;
const dist_dtype_t kDtypes[] = {DIST_INT8,    DIST_UINT8,    DIST_INT32,   DIST_INT64,
                                DIST_FLOAT16, DIST_BFLOAT16, DIST_FLOAT32, DIST_FLOAT64};
const dist_reduce_op_t kOps[] = {DIST_SUM, DIST_PRODUCT, DIST_MIN, DIST_MAX,
                                 DIST_AVG, DIST_BAND,    DIST_BOR, DIST_BXOR};

// Small slots and rings, so every size below streams in many chunks.
CommOptions SmallSegment() {
  CommOptions options;
  options.options = {{"shm.slot_bytes", "4096"}, {"shm.ring_bytes", "4096"}};
  return options;
}

void CheckAllReduce(int rank, dist_backend_comm_t* comm, dist_dtype_t t, dist_reduce_op_t op,
                    uint64_t n, bool in_place, int root) {
  const dist_backend_plugin_t* p = Plugin();
  auto send = Bytes(t, n);
  auto recv = Bytes(t, n);
  for (uint64_t i = 0; i < n; ++i) Put(t, send.data(), i, ReduceInput(rank, i));
  dist_op_args_t a = Args();
  a.send = Buffer(send.data(), n, t);
  a.recv = Buffer(in_place ? send.data() : recv.data(), n, t);
  a.op = op;
  a.root = root;
  const bool reads = root < 0 || rank == root;
  if (!reads) a.recv = Buffer(nullptr, 0, t);
  RANK_OK(rank, RunOp(root < 0 ? p->all_reduce : p->reduce, comm, a));
  if (!reads) return;
  const void* out = in_place ? send.data() : recv.data();
  for (uint64_t i = 0; i < n; ++i) {
    const double got = Get(t, out, i);
    const double want = Expected(t, op, kWorld, i);
    if (got != want) {
      std::fprintf(stderr, "rank %d: %s %s %s n=%llu%s: [%llu] = %g, want %g\n", rank,
                   root < 0 ? "all_reduce" : "reduce", dist_dtype_name(t), dist_reduce_op_name(op),
                   static_cast<unsigned long long>(n), in_place ? " in place" : "",
                   static_cast<unsigned long long>(i), got, want);
      std::_Exit(1);
    }
  }
}

void CheckReduceScatter(int rank, dist_backend_comm_t* comm, dist_dtype_t t, dist_reduce_op_t op,
                        uint64_t n, bool in_place) {
  auto send = Bytes(t, n * kWorld);
  auto recv = Bytes(t, n);
  // Block q of rank r holds ReduceInput(r, q*n + i): the reduction of block
  // `rank` is Expected(rank*n + i).
  for (uint64_t i = 0; i < n * kWorld; ++i) Put(t, send.data(), i, ReduceInput(rank, i));
  dist_op_args_t a = Args();
  a.send = Buffer(send.data(), n * kWorld, t);
  void* out = in_place ? send.data() + rank * n * dist_dtype_size(t) : recv.data();
  a.recv = Buffer(out, n, t);
  a.op = op;
  RANK_OK(rank, RunOp(Plugin()->reduce_scatter, comm, a));
  for (uint64_t i = 0; i < n; ++i) {
    RANK_CHECK(rank, Get(t, out, i) == Expected(t, op, kWorld, rank * n + i));
  }
}

void CheckDataMovement(int rank, dist_backend_comm_t* comm, dist_dtype_t t, uint64_t n) {
  const dist_backend_plugin_t* p = Plugin();
  const size_t es = dist_dtype_size(t);
  {  // broadcast from 1; the root broadcasts in place
    const int root = 1;
    auto buf = Bytes(t, n);
    for (uint64_t i = 0; i < n; ++i) Put(t, buf.data(), i, rank == root ? DataInput(root, i) : 0);
    dist_op_args_t a = Args();
    a.send = rank == root ? Buffer(buf.data(), n, t) : Buffer(nullptr, 0, t);
    a.recv = Buffer(buf.data(), n, t);
    a.root = root;
    RANK_OK(rank, RunOp(p->broadcast, comm, a));
    for (uint64_t i = 0; i < n; ++i) RANK_CHECK(rank, Get(t, buf.data(), i) == DataInput(root, i));
  }
  for (int in_place = 0; in_place < 2; ++in_place) {  // all_gather
    auto send = Bytes(t, n);
    auto recv = Bytes(t, n * kWorld);
    void* src = in_place ? recv.data() + rank * n * es : send.data();
    for (uint64_t i = 0; i < n; ++i) Put(t, src, i, DataInput(rank, i));
    dist_op_args_t a = Args();
    a.send = Buffer(src, n, t);
    a.recv = Buffer(recv.data(), n * kWorld, t);
    RANK_OK(rank, RunOp(p->all_gather, comm, a));
    for (int q = 0; q < kWorld; ++q) {
      for (uint64_t i = 0; i < n; ++i) {
        RANK_CHECK(rank, Get(t, recv.data(), q * n + i) == DataInput(q, i));
      }
    }
  }
  {  // gather to 3
    const int root = 3;
    auto send = Bytes(t, n);
    auto recv = Bytes(t, n * kWorld);
    for (uint64_t i = 0; i < n; ++i) Put(t, send.data(), i, DataInput(rank, i));
    dist_op_args_t a = Args();
    a.send = Buffer(send.data(), n, t);
    a.recv = rank == root ? Buffer(recv.data(), n * kWorld, t) : Buffer(nullptr, 0, t);
    a.root = root;
    RANK_OK(rank, RunOp(p->gather, comm, a));
    if (rank == root) {
      for (int q = 0; q < kWorld; ++q) {
        for (uint64_t i = 0; i < n; ++i) {
          RANK_CHECK(rank, Get(t, recv.data(), q * n + i) == DataInput(q, i));
        }
      }
    }
  }
  {  // scatter from 0: block q is DataInput(q, i)
    const int root = 0;
    auto send = Bytes(t, n * kWorld);
    auto recv = Bytes(t, n);
    for (int q = 0; q < kWorld; ++q) {
      for (uint64_t i = 0; i < n; ++i) Put(t, send.data(), q * n + i, DataInput(q, i));
    }
    dist_op_args_t a = Args();
    a.send = rank == root ? Buffer(send.data(), n * kWorld, t) : Buffer(nullptr, 0, t);
    a.recv = Buffer(recv.data(), n, t);
    a.root = root;
    RANK_OK(rank, RunOp(p->scatter, comm, a));
    for (uint64_t i = 0; i < n; ++i) RANK_CHECK(rank, Get(t, recv.data(), i) == DataInput(rank, i));
  }
  for (int in_place = 0; in_place < 2; ++in_place) {  // all_to_all: block j goes to rank j
    auto send = Bytes(t, n * kWorld);
    auto recv = Bytes(t, n * kWorld);
    // Rank r's block j: DataInput(r * kWorld + j, i).
    for (int j = 0; j < kWorld; ++j) {
      for (uint64_t i = 0; i < n; ++i)
        Put(t, send.data(), j * n + i, DataInput(rank * kWorld + j, i));
    }
    dist_op_args_t a = Args();
    a.send = Buffer(send.data(), n * kWorld, t);
    a.recv = Buffer(in_place ? send.data() : recv.data(), n * kWorld, t);
    if (in_place) {  // validate.hpp: all_to_all does not run in place
      dist_error_t* error = RunOp(p->all_to_all, comm, a);
      const bool invalid = error != nullptr && dist_error_code(error) == DIST_INVALID_ARGUMENT;
      dist_error_destroy(error);
      RANK_CHECK(rank, invalid);
      continue;
    }
    RANK_OK(rank, RunOp(p->all_to_all, comm, a));
    const void* out = recv.data();
    for (int j = 0; j < kWorld; ++j) {
      for (uint64_t i = 0; i < n; ++i) {
        RANK_CHECK(rank, Get(t, out, j * n + i) == DataInput(j * kWorld + rank, i));
      }
    }
  }
}

void CheckSendRecv(int rank, dist_backend_comm_t* comm) {
  // A ring, every rank sending first (with rings far smaller than the
  // messages) and receiving its tags in the opposite order.
  const dist_backend_plugin_t* p = Plugin();
  const int next = (rank + 1) % kWorld;
  const int prev = (rank + kWorld - 1) % kWorld;
  const uint64_t big = 20000;
  std::vector<float> big_out(big), big_in(big);
  std::vector<int8_t> small_out(3), small_in(3);
  for (uint64_t i = 0; i < big; ++i) big_out[i] = static_cast<float>(rank * 100000 + i);
  for (int i = 0; i < 3; ++i) small_out[i] = static_cast<int8_t>(rank * 10 + i);
  dist_op_args_t s1 = Args(), s2 = Args(), r1 = Args(), r2 = Args();
  s1.send = Buffer(big_out.data(), big, DIST_FLOAT32);
  s1.peer = next;
  s1.tag = 7;
  s2.send = Buffer(small_out.data(), 3, DIST_INT8);
  s2.peer = next;
  s2.tag = 9;
  r2.recv = Buffer(small_in.data(), 3, DIST_INT8);
  r2.peer = prev;
  r2.tag = 9;
  r1.recv = Buffer(big_in.data(), big, DIST_FLOAT32);
  r1.peer = prev;
  r1.tag = 7;
  dist_backend_work_t* works[4] = {};
  RANK_OK(rank, p->send(comm, &s1, &works[0]));
  RANK_OK(rank, p->send(comm, &s2, &works[1]));
  RANK_OK(rank, p->recv(comm, &r2, &works[2]));
  RANK_OK(rank, p->recv(comm, &r1, &works[3]));
  for (auto* w : works) {
    RANK_OK(rank, p->work_wait(w, 30000));
    p->work_destroy(w);
  }
  for (uint64_t i = 0; i < big; ++i)
    RANK_CHECK(rank, big_in[i] == static_cast<float>(prev * 100000 + i));
  for (int i = 0; i < 3; ++i) RANK_CHECK(rank, small_in[i] == prev * 10 + i);
}

void CheckAsyncOrder(int rank, dist_backend_comm_t* comm) {
  // Ten outstanding all_reduces, waited for in reverse.
  const dist_backend_plugin_t* p = Plugin();
  constexpr int kOpsInFlight = 10;
  std::vector<std::vector<int64_t>> data(kOpsInFlight, std::vector<int64_t>(1000));
  std::vector<dist_backend_work_t*> works(kOpsInFlight);
  for (int k = 0; k < kOpsInFlight; ++k) {
    for (int i = 0; i < 1000; ++i) data[k][i] = rank + k * i;
    dist_op_args_t a = Args();
    a.send = Buffer(data[k].data(), 1000, DIST_INT64);
    a.recv = a.send;
    a.op = DIST_SUM;
    RANK_OK(rank, p->all_reduce(comm, &a, &works[k]));
  }
  for (int k = kOpsInFlight - 1; k >= 0; --k) {
    RANK_OK(rank, p->work_wait(works[k], 30000));
    int done = 0;
    RANK_OK(rank, p->work_test(works[k], &done));
    RANK_CHECK(rank, done == 1);
    p->work_destroy(works[k]);
    for (int i = 0; i < 1000; ++i) {
      RANK_CHECK(rank, data[k][i] == (0 + 1 + 2 + 3) + kWorld * static_cast<int64_t>(k) * i);
    }
  }
}

int RankBody(int rank, const std::string& store_path) {
  dist_store_t* store = OpenStore(store_path, rank, kWorld);
  dist_backend_comm_t* comm = nullptr;
  RANK_OK(rank, CreateComm(store, rank, kWorld, SmallSegment(), &comm));
  for (dist_dtype_t t : kDtypes) {
    for (dist_reduce_op_t op : kOps) {
      if (dist_dtype_is_floating(t) && (op == DIST_BAND || op == DIST_BOR || op == DIST_BXOR)) {
        continue;
      }
      CheckAllReduce(rank, comm, t, op, 1, false, -1);
      CheckAllReduce(rank, comm, t, op, 3001, false, -1);
      CheckReduceScatter(rank, comm, t, op, 501, false);
    }
    CheckAllReduce(rank, comm, t, DIST_SUM, 2000, true, -1);
    CheckAllReduce(rank, comm, t, DIST_MAX, 2500, false, 2);
    CheckReduceScatter(rank, comm, t, DIST_SUM, 300, true);
    CheckDataMovement(rank, comm, t, 1500);
  }
  CheckDataMovement(rank, comm, DIST_INT32, 1);
  CheckAllReduce(rank, comm, DIST_FLOAT32, DIST_SUM, 0, false, -1);
  dist_op_args_t barrier = Args();
  RANK_OK(rank, RunOp(Plugin()->barrier, comm, barrier));
  CheckSendRecv(rank, comm);
  CheckAsyncOrder(rank, comm);
  Plugin()->comm_destroy(comm);
  store->release(store->ctx);
  return 0;
}

TEST(ShmCollectives, EveryOpDtypeAndReduceOpGivesExactResults) {
  const std::string store = TempDir("collectives") + "/store";
  pid_t leader = 0;
  auto results = RunRanks(
      kWorld, absl::Seconds(90), [&](int rank) { return RankBody(rank, store); },
      [&](const std::vector<pid_t>& pids) { leader = pids[0]; });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].Describe();
  EXPECT_TRUE(SegmentsOf(leader).empty()) << "segment left in /dev/shm";
}

TEST(ShmCollectives, DefaultSegmentSizesWithLargeMessages) {
  // 3 ranks (segments that don't divide evenly), default geometry, 3 MiB.
  const std::string store = TempDir("large") + "/store";
  auto results = RunRanks(3, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 3);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, 3, CommOptions(), &comm));
    const uint64_t n = (3u << 20) / 4 + 5;
    std::vector<float> data(n);
    for (uint64_t i = 0; i < n; ++i) data[i] = static_cast<float>((rank + 1) * (i % 1000));
    dist_op_args_t a = Args();
    a.send = Buffer(data.data(), n, DIST_FLOAT32);
    a.recv = a.send;
    a.op = DIST_SUM;
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, a));
    for (uint64_t i = 0; i < n; ++i)
      RANK_CHECK(rank, data[i] == static_cast<float>(6 * (i % 1000)));
    Plugin()->comm_destroy(comm);
    s->release(s->ctx);
    return 0;
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].Describe();
}

// Non-temporal stores (shm.stream_stores=1; stream_copy.h) from 32 KiB on,
// for the blocks broadcast's and scatter's root and all_to_all write into
// the segment: sizes with ragged tails, buffers and slot offsets off any
// alignment (send starts one byte into its allocation; all_to_all's blocks
// are an odd number of bytes), every byte checked.
TEST(ShmCollectives, StreamStoresGiveExactResults) {
  constexpr int kRanks = 3;
  const std::string store = TempDir("stream") + "/store";
  auto results = RunRanks(kRanks, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, kRanks);
    CommOptions options;
    options.options = {{"shm.stream_stores", "1"}};
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, kRanks, options, &comm));
    const dist_backend_plugin_t* p = Plugin();
    auto byte = [](int from, uint64_t i, uint64_t salt) {
      return static_cast<uint8_t>(from * 37 + i * 11 + (i >> 9) + salt);
    };
    for (const uint64_t n :
         {uint64_t{32768 + 13}, uint64_t{100000 + 7}, uint64_t{(1u << 20) + 1}}) {
      // broadcast from rank 1
      std::vector<uint8_t> data(n + 1);
      for (uint64_t i = 0; i < n; ++i) data[i + 1] = rank == 1 ? byte(1, i, n) : 0;
      dist_op_args_t a = Args();
      a.send = Buffer(data.data() + 1, n, DIST_UINT8);
      a.recv = a.send;
      a.root = 1;
      RANK_OK(rank, RunOp(p->broadcast, comm, a));
      for (uint64_t i = 0; i < n; ++i) RANK_CHECK(rank, data[i + 1] == byte(1, i, n));

      // scatter from rank 2: block q to rank q
      std::vector<uint8_t> blocks(kRanks * n + 1), mine(n, 0);
      for (uint64_t i = 0; i < kRanks * n; ++i) blocks[i + 1] = byte(2, i, n + 1);
      a = Args();
      a.send =
          Buffer(rank == 2 ? blocks.data() + 1 : nullptr, rank == 2 ? kRanks * n : 0, DIST_UINT8);
      a.recv = Buffer(mine.data(), n, DIST_UINT8);
      a.root = 2;
      RANK_OK(rank, RunOp(p->scatter, comm, a));
      for (uint64_t i = 0; i < n; ++i) RANK_CHECK(rank, mine[i] == byte(2, rank * n + i, n + 1));

      // all_to_all: block q of rank r goes to rank q, as block r
      std::vector<uint8_t> out(kRanks * n + 1), in(kRanks * n, 0);
      for (uint64_t i = 0; i < kRanks * n; ++i) out[i + 1] = byte(rank, i, n + 2);
      a = Args();
      a.send = Buffer(out.data() + 1, kRanks * n, DIST_UINT8);
      a.recv = Buffer(in.data(), kRanks * n, DIST_UINT8);
      RANK_OK(rank, RunOp(p->all_to_all, comm, a));
      for (int q = 0; q < kRanks; ++q) {
        for (uint64_t i = 0; i < n; ++i) {
          RANK_CHECK(rank, in[q * n + i] == byte(q, rank * n + i, n + 2));
        }
      }
    }
    p->comm_destroy(comm);
    s->release(s->ctx);
    return 0;
  });
  for (int r = 0; r < kRanks; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].Describe();
}

}  // namespace
}  // namespace dist_test

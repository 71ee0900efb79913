// The shm backend's one-sided rooted operations (plugins/backends/shm/
// collectives.h): a rank that only writes a unit (the root of a small
// broadcast or scatter, the others in a small gather or reduce) returns
// without waiting for its readers, and waits before its next write until
// every rank reached the unit before. These tests run such operations back
// to back, with values that change every call and roots that move, so a
// writer that ran too far ahead would overwrite data a reader had not read
// yet. (failures_test: a mismatch such a writer never saw.)
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_suite.h"

namespace dist_test {
namespace {

constexpr int kWorld = 4;

// What rank `rank` contributes to call `call` at element `i`.
// Distinct for 20000 calls in a row, every rank and i < 5000; sums of four
// stay below 2^31 (int32 overflow is undefined).
int32_t Value(int call, int rank, uint64_t i) {
  return static_cast<int32_t>((call % 20000) * 20000 + rank * 5000 + static_cast<int>(i));
}

// The smallest slots, 4 KiB: 1024 int32 per slot. The sizes below take one
// unit (one-sided) or several (every unit a barrier) for each operation,
// and the calls alternate between them.
CommOptions SmallSlots() {
  CommOptions options;
  options.options = {{"shm.slot_bytes", "4096"}};
  return options;
}

uint64_t CountFor(int call) {
  static const uint64_t kCounts[] = {1, 7, 64, 1500, 9, 1000, 2, 5000};
  return kCounts[call % 8];
}

void Broadcast(int rank, dist_backend_comm_t* comm, int call) {
  const int root = call % kWorld;
  const uint64_t n = CountFor(call);
  std::vector<int32_t> buf(n, -1);
  if (rank == root) {
    for (uint64_t i = 0; i < n; ++i) buf[i] = Value(call, root, i);
  }
  dist_op_args_t a = Args();
  a.send = rank == root ? Buffer(buf.data(), n, DIST_INT32) : Buffer(nullptr, 0, DIST_INT32);
  a.recv = Buffer(buf.data(), n, DIST_INT32);
  a.root = root;
  RANK_OK(rank, RunOp(Plugin()->broadcast, comm, a));
  for (uint64_t i = 0; i < n; ++i) RANK_CHECK(rank, buf[i] == Value(call, root, i));
}

void Scatter(int rank, dist_backend_comm_t* comm, int call) {
  const int root = (call + 1) % kWorld;
  const uint64_t n = CountFor(call) / 2 + 1;
  std::vector<int32_t> send(n * kWorld);
  for (int q = 0; q < kWorld; ++q) {
    for (uint64_t i = 0; i < n; ++i) send[q * n + i] = Value(call, q, i);
  }
  std::vector<int32_t> recv(n, -1);
  dist_op_args_t a = Args();
  a.send =
      rank == root ? Buffer(send.data(), n * kWorld, DIST_INT32) : Buffer(nullptr, 0, DIST_INT32);
  a.recv = Buffer(recv.data(), n, DIST_INT32);
  a.root = root;
  RANK_OK(rank, RunOp(Plugin()->scatter, comm, a));
  for (uint64_t i = 0; i < n; ++i) RANK_CHECK(rank, recv[i] == Value(call, rank, i));
}

void Gather(int rank, dist_backend_comm_t* comm, int call) {
  const int root = (call + 2) % kWorld;
  const uint64_t n = CountFor(call);
  std::vector<int32_t> send(n);
  for (uint64_t i = 0; i < n; ++i) send[i] = Value(call, rank, i);
  std::vector<int32_t> recv(n * kWorld, -1);
  dist_op_args_t a = Args();
  a.send = Buffer(send.data(), n, DIST_INT32);
  a.recv =
      rank == root ? Buffer(recv.data(), n * kWorld, DIST_INT32) : Buffer(nullptr, 0, DIST_INT32);
  a.root = root;
  RANK_OK(rank, RunOp(Plugin()->gather, comm, a));
  if (rank != root) return;
  for (int q = 0; q < kWorld; ++q) {
    for (uint64_t i = 0; i < n; ++i) RANK_CHECK(rank, recv[q * n + i] == Value(call, q, i));
  }
}

void Reduce(int rank, dist_backend_comm_t* comm, int call) {
  const int root = (call + 3) % kWorld;
  const uint64_t n = CountFor(call);
  std::vector<int32_t> send(n);
  for (uint64_t i = 0; i < n; ++i) send[i] = Value(call, rank, i);
  std::vector<int32_t> recv(n, -1);
  dist_op_args_t a = Args();
  a.send = Buffer(send.data(), n, DIST_INT32);
  a.recv = rank == root ? Buffer(recv.data(), n, DIST_INT32) : Buffer(nullptr, 0, DIST_INT32);
  a.op = DIST_SUM;
  a.root = root;
  RANK_OK(rank, RunOp(Plugin()->reduce, comm, a));
  if (rank != root) return;
  for (uint64_t i = 0; i < n; ++i) {
    int32_t want = 0;
    for (int q = 0; q < kWorld; ++q) want += Value(call, q, i);
    RANK_CHECK(rank, recv[i] == want);
  }
}

void AllReduce(int rank, dist_backend_comm_t* comm, int call) {
  const uint64_t n = CountFor(call);
  std::vector<int32_t> data(n);
  for (uint64_t i = 0; i < n; ++i) data[i] = Value(call, rank, i);
  dist_op_args_t a = Args();
  a.send = Buffer(data.data(), n, DIST_INT32);
  a.recv = a.send;
  a.op = DIST_SUM;
  RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, a));
  for (uint64_t i = 0; i < n; ++i) {
    int32_t want = 0;
    for (int q = 0; q < kWorld; ++q) want += Value(call, q, i);
    RANK_CHECK(rank, data[i] == want);
  }
}

TEST(ShmRooted, BackToBackRootedCallsNeverReadAnotherCallsData) {
  const std::string store = TempDir("rooted") + "/store";
  auto results = RunRanks(kWorld, absl::Seconds(120), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, kWorld);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, kWorld, SmallSlots(), &comm));
    // Runs of one kind (a writer may run ahead through all of them), then
    // the kinds in turn (a writer of one meets a reader of the next).
    void (*const kinds[])(int, dist_backend_comm_t*, int) = {Broadcast, Scatter, Gather, Reduce,
                                                             AllReduce};
    int call = 0;
    for (auto* run : kinds) {
      for (int k = 0; k < 400; ++k) run(rank, comm, call++);
    }
    for (int k = 0; k < 2000; ++k) kinds[k % 5](rank, comm, call++);
    // Many small broadcasts from one root: it runs as far ahead as it may.
    for (int k = 0; k < 20000; ++k) {
      int32_t value[3] = {-1, -1, -1};
      if (rank == 0) {
        for (int i = 0; i < 3; ++i) value[i] = Value(call, 0, i);
      }
      dist_op_args_t a = Args();
      a.send = rank == 0 ? Buffer(value, 3, DIST_INT32) : Buffer(nullptr, 0, DIST_INT32);
      a.recv = Buffer(value, 3, DIST_INT32);
      RANK_OK(rank, RunOp(Plugin()->broadcast, comm, a));
      for (int i = 0; i < 3; ++i) RANK_CHECK(rank, value[i] == Value(call, 0, i));
      ++call;
    }
    // And in the order a slower rank would see them: a rank that slept
    // lets the writers reach it while it reads.
    for (int k = 0; k < 200; ++k) {
      if (k % 50 == rank) absl::SleepFor(absl::Milliseconds(5));
      kinds[k % 4](rank, comm, call++);
    }
    Plugin()->comm_destroy(comm);
    s->release(s->ctx);
    return 0;
  });
  ExpectAllOk(results);
}

// A writer may run ahead of its readers by as many small units as the eager
// area has entries (16, or 64 where ranks share CPUs: layout.h), and not
// one more: here the readers sleep while the writers issue 150 calls, far
// past either depth, then read them all. A writer that overran the depth
// would overwrite a cell not read yet (a wrong value, or a cell that never
// shows its unit: an error).
TEST(ShmRooted, WritersFarAheadOfSleepingReadersWaitAtTheEagerDepth) {
  for (const int ranks : {2, 4}) {
    const std::string store = TempDir(absl::StrCat("ahead", ranks)) + "/store";
    auto results = RunRanks(ranks, absl::Seconds(120), [&](int rank) {
      dist_store_t* s = OpenStore(store, rank, ranks);
      dist_backend_comm_t* comm = nullptr;
      RANK_OK(rank, CreateComm(s, rank, ranks, CommOptions(), &comm));
      constexpr int kCalls = 150;
      // Broadcast from rank 0: the receivers start late.
      if (rank != 0) absl::SleepFor(absl::Milliseconds(300));
      for (int call = 0; call < kCalls; ++call) {
        int32_t value[2] = {-1, -1};
        if (rank == 0) value[0] = value[1] = Value(call, 0, 0);
        dist_op_args_t a = Args();
        a.send = rank == 0 ? Buffer(value, 2, DIST_INT32) : Buffer(nullptr, 0, DIST_INT32);
        a.recv = Buffer(value, 2, DIST_INT32);
        RANK_OK(rank, RunOp(Plugin()->broadcast, comm, a));
        RANK_CHECK(rank, value[0] == Value(call, 0, 0) && value[1] == value[0]);
      }
      // Gather to rank 0: now the root starts late.
      if (rank == 0) absl::SleepFor(absl::Milliseconds(300));
      for (int call = 0; call < kCalls; ++call) {
        int32_t mine = Value(call, rank, 0);
        std::vector<int32_t> all(ranks, -1);
        dist_op_args_t a = Args();
        a.send = Buffer(&mine, 1, DIST_INT32);
        a.recv = rank == 0 ? Buffer(all.data(), ranks, DIST_INT32) : Buffer(nullptr, 0, DIST_INT32);
        RANK_OK(rank, RunOp(Plugin()->gather, comm, a));
        for (int q = 0; rank == 0 && q < ranks; ++q) RANK_CHECK(rank, all[q] == Value(call, q, 0));
      }
      Plugin()->comm_destroy(comm);
      s->release(s->ctx);
      return 0;
    });
    ExpectAllOk(results);
  }
}

// What rank `rank` contributes to a two-rank reduce, call `call`, element
// `i`: small integers, so that sums are exact in bfloat16 too.
int32_t SmallValue(int call, int rank, uint64_t i) {
  return static_cast<int32_t>((call * 7 + rank * 3 + i) % 100);
}

uint16_t ToBfloat16(float value) {  // exact for the small integers above
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}

float FromBfloat16(uint16_t value) {
  const uint32_t bits = uint32_t{value} << 16;
  float out = 0;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// Two ranks reduce in one one-sided unit up to a whole slot (not only up to
// the 16 KiB every other world size stops at): the rank that is not the
// root copies its data in and returns, and the root reduces its own data
// where it lies, in place or not, with either rank as root.
TEST(ShmRooted, TwoRankReduceInOneUnitUpToASlot) {
  constexpr int kRanks = 2;
  const std::string store = TempDir("rooted2") + "/store";
  auto results = RunRanks(kRanks, absl::Seconds(120), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, kRanks);
    dist_backend_comm_t* comm = nullptr;
    CommOptions options;
    options.options = {{"shm.slot_bytes", "65536"}};  // 16384 int32
    RANK_OK(rank, CreateComm(s, rank, kRanks, options, &comm));
    // 16 KiB and under took one unit before; 5000-16384 int32 newly do; the
    // last two stream in chunks.
    const uint64_t kCounts[] = {3000, 5000, 16384, 9000, 16385, 40000};
    for (int call = 0; call < 600; ++call) {
      const int root = (call / 2) % kRanks;
      const bool in_place = (call / 4) % 2 == 1 && rank == root;
      const bool bf16 = (call / 8) % 3 == 2;
      const uint64_t n = kCounts[call % 6];
      std::vector<int32_t> send32(n), recv32(n, -1);
      std::vector<uint16_t> send16(n), recv16(n, 0xFFFF);
      for (uint64_t i = 0; i < n; ++i) {
        send32[i] = SmallValue(call, rank, i);
        send16[i] = ToBfloat16(static_cast<float>(send32[i]));
      }
      dist_op_args_t a = Args();
      if (bf16) {
        a.send = Buffer(send16.data(), n, DIST_BFLOAT16);
        a.recv = Buffer(in_place ? send16.data() : recv16.data(), n, DIST_BFLOAT16);
      } else {
        a.send = Buffer(send32.data(), n, DIST_INT32);
        a.recv = Buffer(in_place ? send32.data() : recv32.data(), n, DIST_INT32);
      }
      if (rank != root) a.recv = Buffer(nullptr, 0, bf16 ? DIST_BFLOAT16 : DIST_INT32);
      a.op = DIST_SUM;
      a.root = root;
      RANK_OK(rank, RunOp(Plugin()->reduce, comm, a));
      if (rank != root) continue;
      for (uint64_t i = 0; i < n; ++i) {
        const int32_t want = SmallValue(call, 0, i) + SmallValue(call, 1, i);
        const int32_t got =
            bf16 ? static_cast<int32_t>(FromBfloat16(in_place ? send16[i] : recv16[i]))
                 : (in_place ? send32[i] : recv32[i]);
        RANK_CHECK(rank, got == want);
      }
    }
    Plugin()->comm_destroy(comm);
    s->release(s->ctx);
    return 0;
  });
  ExpectAllOk(results);
}

}  // namespace
}  // namespace dist_test

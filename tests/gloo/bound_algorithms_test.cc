// The Gloo backend's cached legacy algorithm classes (bound_algorithms.cc):
// every all_reduce class it offers forced in turn (and the automatic choice) at 2, 3
// and 4 real ranks, every dtype and every reduce op it serves, in place and
// out of place, several counts (more shapes than the cache holds, so
// instances are also evicted and rebuilt); broadcast from every root and
// all_gather in place and out of place; barrier. Each result is checked
// against values computed here from the inputs' formula, with plain
// arithmetic (not the SDK's reduction kernels the plugin uses).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/gloo/gloo_suite.h"

namespace dist_test {
namespace {

// Inputs: rank r's element k is (3k + 7r) mod 5 + 1 (product: 1 or 2), small
// integers that every dtype holds exactly, and whose sums and products do
// too (float16/bfloat16 included).
int64_t Value(int rank, size_t k, dist_reduce_op_t op) {
  if (op == DIST_PRODUCT) return static_cast<int64_t>((k + rank) % 2 + 1);
  return static_cast<int64_t>((3 * k + 7 * static_cast<size_t>(rank)) % 5 + 1);
}

// Exact for the normal values used here (integers below 2048).
uint16_t ToHalf(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (v == 0) return 0;
  const uint32_t exponent = ((bits >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>((exponent << 10) | ((bits >> 13) & 0x3ff));
}
float FromHalf(uint16_t h) {
  if ((h & 0x7fff) == 0) return 0;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t bits =
      ((h & 0x8000u) << 16) | ((exponent - 15 + 127) << 23) | ((h & 0x3ffu) << 13);
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}
uint16_t ToBFloat(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>(bits >> 16);
}
float FromBFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

bool IsFloat(dist_dtype_t t) {
  return t == DIST_FLOAT16 || t == DIST_BFLOAT16 || t == DIST_FLOAT32 || t == DIST_FLOAT64;
}

void Store(dist_dtype_t t, void* data, size_t k, double v) {
  switch (t) {
    case DIST_INT8:
      static_cast<int8_t*>(data)[k] = static_cast<int8_t>(v);
      break;
    case DIST_UINT8:
      static_cast<uint8_t*>(data)[k] = static_cast<uint8_t>(v);
      break;
    case DIST_INT32:
      static_cast<int32_t*>(data)[k] = static_cast<int32_t>(v);
      break;
    case DIST_INT64:
      static_cast<int64_t*>(data)[k] = static_cast<int64_t>(v);
      break;
    case DIST_FLOAT16:
      static_cast<uint16_t*>(data)[k] = ToHalf(static_cast<float>(v));
      break;
    case DIST_BFLOAT16:
      static_cast<uint16_t*>(data)[k] = ToBFloat(static_cast<float>(v));
      break;
    case DIST_FLOAT32:
      static_cast<float*>(data)[k] = static_cast<float>(v);
      break;
    default:
      static_cast<double*>(data)[k] = v;
      break;
  }
}

double Load(dist_dtype_t t, const void* data, size_t k) {
  switch (t) {
    case DIST_INT8:
      return static_cast<const int8_t*>(data)[k];
    case DIST_UINT8:
      return static_cast<const uint8_t*>(data)[k];
    case DIST_INT32:
      return static_cast<const int32_t*>(data)[k];
    case DIST_INT64:
      return static_cast<double>(static_cast<const int64_t*>(data)[k]);
    case DIST_FLOAT16:
      return FromHalf(static_cast<const uint16_t*>(data)[k]);
    case DIST_BFLOAT16:
      return FromBFloat(static_cast<const uint16_t*>(data)[k]);
    case DIST_FLOAT32:
      return static_cast<const float*>(data)[k];
    default:
      return static_cast<const double*>(data)[k];
  }
}

// The expected all_reduce result at element k, from Value alone.
double Expected(dist_dtype_t t, dist_reduce_op_t op, int world, size_t k) {
  int64_t acc = Value(0, k, op);
  for (int r = 1; r < world; ++r) {
    const int64_t v = Value(r, k, op);
    switch (op) {
      case DIST_SUM:
      case DIST_AVG:
        acc += v;
        break;
      case DIST_PRODUCT:
        acc *= v;
        break;
      case DIST_MIN:
        acc = v < acc ? v : acc;
        break;
      case DIST_MAX:
        acc = v > acc ? v : acc;
        break;
      case DIST_BAND:
        acc &= v;
        break;
      case DIST_BOR:
        acc |= v;
        break;
      case DIST_BXOR:
        acc ^= v;
        break;
      default:
        break;
    }
  }
  if (op == DIST_AVG) {
    if (IsFloat(t)) return static_cast<double>(acc) / world;
    return static_cast<double>(acc / world);  // integers truncate
  }
  return static_cast<double>(acc);
}

bool Matches(dist_dtype_t t, double got, double want) {
  if (!IsFloat(t)) return got == want;
  // One rounding of the dtype (float16 has 11 significant bits, bfloat16 8).
  const double tolerance = t == DIST_BFLOAT16 ? 1.0 / 128 : t == DIST_FLOAT16 ? 1.0 / 1024 : 1e-6;
  return std::fabs(got - want) <= tolerance * std::fabs(want);
}

constexpr dist_dtype_t kDtypes[] = {DIST_INT8,    DIST_UINT8,    DIST_INT32,   DIST_INT64,
                                    DIST_FLOAT16, DIST_BFLOAT16, DIST_FLOAT32, DIST_FLOAT64};
constexpr dist_reduce_op_t kOps[] = {DIST_SUM, DIST_PRODUCT, DIST_MIN, DIST_MAX,
                                     DIST_AVG, DIST_BAND,    DIST_BOR, DIST_BXOR};
// Where the ranks agree on a limit of 8 KiB a message for the synchronous
// pairs (the "auto" communicator below, plugins/backends/gloo/sync_limit.h),
// up to 1000 elements run on them and 20000 on the communicator's own pairs;
// elsewhere (a limit of 64 KiB to 1 MiB, by the host's send buffers) 20000
// elements of 4 bytes or less run on them too.
constexpr size_t kCounts[] = {1, 7, 1000, 20000};

// One all_reduce of `n` elements, checked against plain arithmetic.
void CheckAllReduce(int rank, int world, dist_backend_comm_t* comm, const std::string& what,
                    dist_dtype_t t, dist_reduce_op_t op, size_t n, bool in_place) {
  const size_t e = dist_dtype_size(t);
  std::vector<char> send(n * e), recv(n * e, 0x5a);
  for (size_t k = 0; k < n; ++k) Store(t, send.data(), k, Value(rank, k, op));
  dist_op_args_t a = Args();
  a.send = Buffer(send.data(), n, t);
  a.recv = in_place ? a.send : Buffer(recv.data(), n, t);
  a.op = op;
  RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, a));
  const void* out = in_place ? send.data() : recv.data();
  for (size_t k = 0; k < n; ++k) {
    const double got = Load(t, out, k);
    const double want = Expected(t, op, world, k);
    if (!Matches(t, got, want)) {
      std::fprintf(stderr, "rank %d: %s %s %s n=%zu %s: element %zu is %g, want %g\n", rank,
                   what.c_str(), dist_dtype_name(t), dist_reduce_op_name(op), n,
                   in_place ? "in place" : "out of place", k, got, want);
      std::_Exit(1);
    }
  }
  if (!in_place) {  // the input is left alone
    for (size_t k = 0; k < n; ++k) {
      RANK_CHECK(rank, Load(t, send.data(), k) == static_cast<double>(Value(rank, k, op)));
    }
  }
}

void CheckAllReduces(int rank, int world, dist_backend_comm_t* comm, const std::string& what) {
  for (dist_dtype_t t : kDtypes) {
    for (dist_reduce_op_t op : kOps) {
      const bool bitwise = op == DIST_BAND || op == DIST_BOR || op == DIST_BXOR;
      if (bitwise && IsFloat(t)) continue;
      for (size_t n : kCounts) {
        for (bool in_place : {false, true})
          CheckAllReduce(rank, world, comm, what, t, op, n, in_place);
      }
    }
  }
  // The largest messages the synchronous pairs take where the host allows
  // 1 MiB (512 KiB and 1 MiB, the most the bound classes take), several in
  // a row: ranks that write that much to each other at once must not block
  // each other (sync_limit.h).
  for (dist_dtype_t t : {DIST_FLOAT32, DIST_INT64}) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      CheckAllReduce(rank, world, comm, what, t, DIST_SUM, 131072, repeat == 1);
    }
  }
  // Above 1 MiB (the pipelined ring where the synchronous pairs allow it,
  // else gloo::allreduce): many chunks a block, blocks of unequal length.
  // Only on the communicators where the ring or its fallbacks run (auto
  // with rank 0's small limit, RingPipelined, no synchronous pairs): the
  // classes forced by name are covered by the sizes above.
  if (what != "auto" && what != "RingPipelined" && what != "sync_pairs=0") return;
  for (dist_dtype_t t : {DIST_FLOAT32, DIST_INT64, DIST_BFLOAT16}) {
    for (dist_reduce_op_t op : {DIST_SUM, DIST_MAX, DIST_AVG}) {
      CheckAllReduce(rank, world, comm, what, t, op, 400003, op == DIST_MAX);
    }
  }
}

// A barrier holds every rank until all have reached it: each rank leaves a
// mark before barrier i and, once through, finds every rank's mark for i.
// (The ranks are processes; the marks are files in `dir`.)
void CheckBarriers(int rank, int world, dist_backend_comm_t* comm, const std::string& dir) {
  auto mark = [&](int i, int r) { return absl::StrCat(dir, "/barrier_", i, "_rank_", r); };
  for (int i = 0; i < 5; ++i) {
    std::ofstream(mark(i, rank)) << "here";
    RANK_OK(rank, RunOp(Plugin()->barrier, comm, Args()));
    for (int r = 0; r < world; ++r) {
      RANK_CHECK(rank, std::ifstream(mark(i, r)).good());
    }
  }
}

void CheckDataOps(int rank, int world, dist_backend_comm_t* comm) {
  const dist_backend_plugin_t* p = Plugin();
  // 1000000: a broadcast of 1 MB and all_gathers of 2-4 MB, on the legacy
  // classes (up to 4 MiB) with 1 MB messages.
  for (size_t bytes : {size_t{1}, size_t{13}, size_t{5000}, size_t{100000}, size_t{1000000}}) {
    for (int root = 0; root < world; ++root) {
      for (bool in_place : {false, true}) {
        std::vector<uint8_t> send(bytes), recv(bytes, 0xee);
        for (size_t k = 0; k < bytes; ++k) send[k] = static_cast<uint8_t>(k * 7 + root * 31 + 1);
        std::vector<uint8_t> want = send;
        if (rank != root) std::fill(send.begin(), send.end(), 0);  // only the root's counts
        dist_op_args_t a = Args();
        a.send = Buffer(send.data(), bytes, DIST_UINT8);
        a.recv = in_place ? a.send : Buffer(recv.data(), bytes, DIST_UINT8);
        a.root = root;
        RANK_OK(rank, RunOp(p->broadcast, comm, a));
        RANK_CHECK(rank, (in_place ? send : recv) == want);
      }
    }
    for (bool in_place : {false, true}) {
      const size_t n = bytes / 8 + 1;  // float64 elements per rank
      std::vector<double> send(n), recv(n * world, -1.0);
      for (size_t k = 0; k < n; ++k) send[k] = static_cast<double>(rank * 1000 + k) + 0.25;
      if (in_place) std::copy(send.begin(), send.end(), recv.begin() + rank * n);
      dist_op_args_t a = Args();
      a.send = in_place ? Buffer(recv.data() + rank * n, n, DIST_FLOAT64)
                        : Buffer(send.data(), n, DIST_FLOAT64);
      a.recv = Buffer(recv.data(), n * world, DIST_FLOAT64);
      RANK_OK(rank, RunOp(p->all_gather, comm, a));
      for (int r = 0; r < world; ++r) {
        for (size_t k = 0; k < n; ++k) {
          RANK_CHECK(rank, recv[r * n + k] == static_cast<double>(r * 1000 + k) + 0.25);
        }
      }
    }
  }
  for (int i = 0; i < 3; ++i) RANK_OK(rank, RunOp(p->barrier, comm, Args()));
}

void RunWorld(int world, const std::string& dir_name) {
  const std::string dir = TempDir(dir_name);
  auto results = RunRanks(world, absl::Seconds(240), [&](int rank) {
    for (const char* algorithm :
         {"auto", "AllreduceRing", "AllreduceRingChunked", "AllreduceHalvingDoubling",
          "AllreduceBcube", "RecursiveDoubling", "RingPipelined"}) {
      // A store per communicator: Gloo's rendezvous keys are bare ranks.
      dist_store_t* store = OpenStore(absl::StrCat(dir, "/store_", algorithm));
      CommOptions options;
      options.options = {{"gloo.allreduce_algorithm", algorithm}};
      options.group = algorithm;
      // Rank 0 allows the synchronous pairs 8 KiB, the others what their
      // buffers allow: every rank must use 8 KiB, or operations between
      // 8 KiB and that limit run on different pairs and time out.
      const bool mixed = std::string(algorithm) == "auto";
      if (mixed && rank == 0) options.options.push_back({"gloo.sync_max_bytes", "8192"});
      dist_backend_comm_t* comm = nullptr;
      RANK_OK(rank, CreateComm(store, rank, world, options, &comm));
      CheckAllReduces(rank, world, comm, algorithm);
      if (mixed || std::string(algorithm) == "RingPipelined") {
        CheckDataOps(rank, world, comm);
        CheckBarriers(rank, world, comm, dir);
      }
      Plugin()->comm_destroy(comm);
    }
    // Every instance on the communicator's own pairs, as before the
    // synchronous ones existed (gloo.sync_pairs=0).
    dist_store_t* store = OpenStore(absl::StrCat(dir, "/store_async"));
    CommOptions options;
    options.options = {{"gloo.sync_pairs", "0"}};
    options.group = "async";
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, rank, world, options, &comm));
    CheckAllReduces(rank, world, comm, "sync_pairs=0");
    CheckDataOps(rank, world, comm);
    Plugin()->comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

// AllreduceBcube writes into the peers' result buffers with no go-ahead,
// which on asynchronous pairs let a peer that started the next run
// overwrite a result before it was copied out (algorithm.cc): with the same
// inputs every time that cannot show, so here every run has new ones and
// each result is checked. 4 ranks (Bcube needs a power of two), 300 runs a
// count back to back, then 100 runs of the three counts in turn (their
// instances' messages share the pairs). For the automatic choice and the
// class asked for by name (on the synchronous pairs; a count above their
// limit, 64 KiB on a default Linux, runs on the others as
// AllreduceHalvingDoubling), and with gloo.sync_pairs=0, where
// AllreduceHalvingDoubling runs every count. With Bcube let onto the
// asynchronous pairs, the last one failed within 8-124 runs (4 of 4 tries).
void CheckReusedWithNewInputs(int rank, int world, dist_backend_comm_t* comm,
                              const std::string& what) {
  // Run `run` of `n` elements, with inputs of its own, checked.
  auto check = [&](size_t n, int run) {
    // Integers below 2^24: float sums are exact.
    auto value = [&](int r, size_t k) {
      return static_cast<float>((k * 13 + static_cast<size_t>(r) * 101 + run * 7) % 4099);
    };
    std::vector<float> data(n);
    for (size_t k = 0; k < n; ++k) data[k] = value(rank, k);
    dist_op_args_t a = Args();
    a.send = Buffer(data.data(), n, DIST_FLOAT32);
    a.recv = a.send;
    a.op = DIST_SUM;
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, a));
    for (size_t k = 0; k < n; ++k) {
      float want = 0;
      for (int r = 0; r < world; ++r) want += value(r, k);
      if (data[k] != want) {
        std::fprintf(stderr, "rank %d: %s n=%zu run %d: element %zu is %g, want %g\n", rank,
                     what.c_str(), n, run, k, data[k], want);
        std::_Exit(1);
      }
    }
  };
  const size_t counts[] = {4, 1000, 20000};
  // One instance again and again, then the three interleaved.
  for (size_t n : counts) {
    for (int run = 0; run < 300; ++run) check(n, run);
  }
  for (int run = 0; run < 100; ++run) {
    for (size_t n : counts) check(n, 1000 + run);
  }
}

TEST(GlooBoundAlgorithms, BcubeReusedWithNewInputsOnFourRanks) {
  const std::string dir = TempDir("bcube4");
  auto results = RunRanks(4, absl::Seconds(240), [&](int rank) {
    const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>
        setups = {
            {"auto", {}},
            {"bcube", {{"gloo.allreduce_algorithm", "AllreduceBcube"}}},
            {"bcube_async",
             {{"gloo.allreduce_algorithm", "AllreduceBcube"}, {"gloo.sync_pairs", "0"}}},
        };
    for (const auto& [name, settings] : setups) {
      dist_store_t* store = OpenStore(absl::StrCat(dir, "/store_", name));
      CommOptions options;
      options.options = settings;
      options.group = name.c_str();
      dist_backend_comm_t* comm = nullptr;
      RANK_OK(rank, CreateComm(store, rank, 4, options, &comm));
      CheckReusedWithNewInputs(rank, 4, comm, name);
      Plugin()->comm_destroy(comm);
    }
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

// The recursive doubling all_reduce skips Gloo's notifications and relies
// on the synchronous pairs reading each message only when it is waited for
// (allreduce_recursive_doubling.h): reused with new inputs, a rank that
// runs ahead must never overwrite what a slower partner has yet to reduce.
// Two ranks (one exchange), three and five (one extra rank folded in and
// the result sent back), four (two doubling steps); the largest count runs
// on the asynchronous pairs where the synchronous ones' limit is below it,
// as AllreduceRing or AllreduceHalvingDoubling.
void RecursiveDoublingReused(int world) {
  const std::string dir = TempDir(absl::StrCat("doubling", world));
  auto results = RunRanks(world, absl::Seconds(240), [&](int rank) {
    dist_store_t* store = OpenStore(absl::StrCat(dir, "/store"));
    CommOptions options;
    options.options = {{"gloo.allreduce_algorithm", "RecursiveDoubling"}};
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, rank, world, options, &comm));
    CheckReusedWithNewInputs(rank, world, comm, "RecursiveDoubling");
    Plugin()->comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

TEST(GlooBoundAlgorithms, RecursiveDoublingReusedWithNewInputsOnTwoRanks) {
  RecursiveDoublingReused(2);
}
TEST(GlooBoundAlgorithms, RecursiveDoublingReusedWithNewInputsOnThreeRanks) {
  RecursiveDoublingReused(3);
}
TEST(GlooBoundAlgorithms, RecursiveDoublingReusedWithNewInputsOnFourRanks) {
  RecursiveDoublingReused(4);
}
TEST(GlooBoundAlgorithms, RecursiveDoublingReusedWithNewInputsOnFiveRanks) {
  RecursiveDoublingReused(5);
}

// Broadcast and all_gather on the synchronous pairs skip Gloo's go-aheads
// (broadcast_direct.h, allgather_direct.h): a root may run many broadcasts
// ahead of a receiver, and a rank one all_gather ahead of a peer. Reused
// with new inputs every run, every result must still be the run's own.
// 200 runs a root of 4 B, 4 KiB and 64 KiB (the largest that goes direct)
// broadcasts and 50 of 256 KiB (after a clear-to-send from each receiver),
// then 300 all_gathers of each size up to 64 KiB, every byte checked. With
// the direct classes let onto the asynchronous pairs the all_gathers
// failed within 0-32 runs (6 of 6 tries); the broadcasts did not (there a
// write can only spoil the receiver's copy out, too short a window to
// hit). Ends of a pair that disagreed about the clear-to-send failed the
// first 256 KiB broadcast (a build that let them, 2026-12-03).
void CheckDirectReusedWithNewInputs(int rank, int world, dist_backend_comm_t* comm) {
  const dist_backend_plugin_t* p = Plugin();
  auto value = [](int run, int from, size_t k) {
    return static_cast<uint8_t>((run * 31 + from * 7 + k * 13) % 251);
  };
  for (size_t bytes : {size_t{4}, size_t{4096}, size_t{65536}, size_t{262144}}) {
    const int runs = bytes > 65536 ? 50 : 200;
    for (int root = 0; root < world; ++root) {
      for (int run = 0; run < runs; ++run) {
        std::vector<uint8_t> data(bytes, 0);
        if (rank == root) {
          for (size_t k = 0; k < bytes; ++k) data[k] = value(run, root, k);
        }
        dist_op_args_t a = Args();
        a.send = Buffer(data.data(), bytes, DIST_UINT8);
        a.recv = a.send;
        a.root = root;
        RANK_OK(rank, RunOp(p->broadcast, comm, a));
        for (size_t k = 0; k < bytes; ++k) {
          if (data[k] != value(run, root, k)) {
            std::fprintf(stderr, "rank %d: broadcast of %zu B from %d, run %d: byte %zu is %d\n",
                         rank, bytes, root, run, k, data[k]);
            std::_Exit(1);
          }
        }
      }
    }
  }
  for (size_t bytes : {size_t{4}, size_t{4096}, size_t{65536}}) {
    for (int run = 0; run < 300; ++run) {
      std::vector<uint8_t> send(bytes), recv(bytes * world, 0);
      for (size_t k = 0; k < bytes; ++k) send[k] = value(run, rank, k);
      dist_op_args_t a = Args();
      a.send = Buffer(send.data(), bytes, DIST_UINT8);
      a.recv = Buffer(recv.data(), bytes * world, DIST_UINT8);
      RANK_OK(rank, RunOp(p->all_gather, comm, a));
      for (int r = 0; r < world; ++r) {
        for (size_t k = 0; k < bytes; ++k) {
          if (recv[r * bytes + k] != value(run, r, k)) {
            std::fprintf(stderr, "rank %d: all_gather of %zu B, run %d: rank %d's byte %zu is %d\n",
                         rank, bytes, run, r, k, recv[r * bytes + k]);
            std::_Exit(1);
          }
        }
      }
    }
  }
}

TEST(GlooBoundAlgorithms, DirectBroadcastAndAllGatherReusedWithNewInputs) {
  for (int world : {2, 3}) {
    const std::string dir = TempDir(absl::StrCat("direct", world));
    auto results = RunRanks(world, absl::Seconds(240), [&](int rank) {
      dist_store_t* store = OpenStore(absl::StrCat(dir, "/store"));
      dist_backend_comm_t* comm = nullptr;
      RANK_OK(rank, CreateComm(store, rank, world, CommOptions(), &comm));
      CheckDirectReusedWithNewInputs(rank, world, comm);
      Plugin()->comm_destroy(comm);
      return 0;
    });
    for (const RankResult& r : results)
      EXPECT_TRUE(r.ok()) << "world " << world << ": " << r.Describe();
  }
}

// The pipelined ring (ring_pipelined.h) sends with no go-ahead, chunk after
// chunk, straight into the peers' buffers: a rank may be up to W-1 chunks
// ahead of its right neighbour, and a run's last messages share the pairs
// with the next run's first. Reused with new inputs every run, in place and
// not, all_reduces of several sizes in turn (one chunk, many, fewer
// elements than ranks) with all_gathers and broadcasts (from every root in
// turn) between them, every element checked against values computed here.
void CheckRingReusedWithNewInputs(int rank, int world, dist_backend_comm_t* comm) {
  const dist_backend_plugin_t* p = Plugin();
  auto value = [](int run, int from, size_t k) {  // integers: float sums are exact
    return static_cast<float>((k * 13 + static_cast<size_t>(from) * 101 + run * 7) % 4099);
  };
  for (int run = 0; run < 12; ++run) {
    for (size_t n : {size_t{3}, size_t{70000}, size_t{700001}}) {
      const bool in_place = (run + n) % 2 == 0;
      std::vector<float> send(n), recv(n, -1.0f);
      for (size_t k = 0; k < n; ++k) send[k] = value(run, rank, k);
      dist_op_args_t a = Args();
      a.send = Buffer(send.data(), n, DIST_FLOAT32);
      a.recv = in_place ? a.send : Buffer(recv.data(), n, DIST_FLOAT32);
      a.op = DIST_SUM;
      RANK_OK(rank, RunOp(p->all_reduce, comm, a));
      const std::vector<float>& out = in_place ? send : recv;
      for (size_t k = 0; k < n; ++k) {
        float want = 0;
        for (int r = 0; r < world; ++r) want += value(run, r, k);
        if (out[k] != want) {
          std::fprintf(stderr,
                       "rank %d: ring all_reduce n=%zu run %d: element %zu is %g, want %g\n", rank,
                       n, run, k, out[k], want);
          std::_Exit(1);
        }
      }
    }
    const size_t block = 300007;  // bytes a rank: 0.6-1.2 MB in all
    std::vector<uint8_t> send(block), recv(block * world, 0);
    for (size_t k = 0; k < block; ++k) send[k] = static_cast<uint8_t>(value(run, rank, k));
    dist_op_args_t a = Args();
    a.send = Buffer(send.data(), block, DIST_UINT8);
    a.recv = Buffer(recv.data(), block * world, DIST_UINT8);
    RANK_OK(rank, RunOp(p->all_gather, comm, a));
    for (int r = 0; r < world; ++r) {
      for (size_t k = 0; k < block; ++k) {
        if (recv[r * block + k] != static_cast<uint8_t>(value(run, r, k))) {
          std::fprintf(stderr, "rank %d: ring all_gather run %d: rank %d's byte %zu is %d\n", rank,
                       run, r, k, recv[r * block + k]);
          std::_Exit(1);
        }
      }
    }
    const int root = run % world;
    const size_t bytes = 1200007;  // a chain of many chunks
    std::vector<uint8_t> data(bytes, 0), copy(bytes, 0);
    if (rank == root) {
      for (size_t k = 0; k < bytes; ++k) data[k] = static_cast<uint8_t>(value(run, root, k));
    }
    a = Args();
    a.send = Buffer(data.data(), bytes, DIST_UINT8);
    a.recv = run % 3 == 0 ? a.send : Buffer(copy.data(), bytes, DIST_UINT8);
    a.root = root;
    RANK_OK(rank, RunOp(p->broadcast, comm, a));
    const std::vector<uint8_t>& got = run % 3 == 0 ? data : copy;
    for (size_t k = 0; k < bytes; ++k) {
      if (got[k] != static_cast<uint8_t>(value(run, root, k))) {
        std::fprintf(stderr, "rank %d: ring broadcast from %d, run %d: byte %zu is %d\n", rank,
                     root, run, k, got[k]);
        std::_Exit(1);
      }
    }
  }
}

TEST(GlooBoundAlgorithms, RingPipelinedReusedWithNewInputs) {
  for (int world : {2, 3, 4, 5}) {
    const std::string dir = TempDir(absl::StrCat("ring", world));
    auto results = RunRanks(world, absl::Seconds(240), [&](int rank) {
      dist_store_t* store = OpenStore(absl::StrCat(dir, "/store"));
      CommOptions options;
      options.options = {{"gloo.allreduce_algorithm", "RingPipelined"}};
      dist_backend_comm_t* comm = nullptr;
      RANK_OK(rank, CreateComm(store, rank, world, options, &comm));
      CheckRingReusedWithNewInputs(rank, world, comm);
      Plugin()->comm_destroy(comm);
      return 0;
    });
    for (const RankResult& r : results)
      EXPECT_TRUE(r.ok()) << "world " << world << ": " << r.Describe();
  }
}

// comm_create of a one-rank group with option `key`=`value`, which must
// refuse it as INVALID_ARGUMENT; returns the message.
std::string RefusalOf(const std::string& dir_name, const char* key, const char* value) {
  const std::string dir = TempDir(dir_name);
  dist_store_t* store = OpenStore(dir + "/store");
  CommOptions options;
  options.options = {{key, value}};
  dist_backend_comm_t* comm = nullptr;
  dist_error_t* e = CreateComm(store, 0, 1, options, &comm);
  if (e == nullptr) {
    ADD_FAILURE() << key << "=" << value << " was accepted";
    Plugin()->comm_destroy(comm);
    return "";
  }
  store->release(store->ctx);  // comm_create failed: the store is still ours
  EXPECT_EQ(dist_error_code(e), DIST_INVALID_ARGUMENT);
  std::string message = dist_error_message(e);
  dist_error_destroy(e);
  return message;
}

TEST(GlooBoundAlgorithms, SyncMaxBytesMustBeANumber) {
  EXPECT_EQ(RefusalOf("sync_max", "gloo.sync_max_bytes", "64k"),
            "gloo backend: gloo.sync_max_bytes (or DIST_GLOO_SYNC_MAX_BYTES) is '64k'; give a "
            "number of bytes, e.g. 65536");
}

TEST(GlooBoundAlgorithms, SpinMustBeMicrosecondsInRange) {
  EXPECT_EQ(RefusalOf("spin_word", "gloo.spin_us", "50us"),
            "gloo backend: gloo.spin_us (or DIST_GLOO_SPIN_US) is '50us'; give microseconds from "
            "0 (never poll) to 100000, e.g. 50");
  EXPECT_EQ(RefusalOf("spin_large", "gloo.spin_us", "200000"),
            "gloo backend: gloo.spin_us (or DIST_GLOO_SPIN_US) is '200000'; give microseconds "
            "from 0 (never poll) to 100000, e.g. 50");
}

TEST(GlooBoundAlgorithms, TwoRanks) { RunWorld(2, "bound2"); }
TEST(GlooBoundAlgorithms, ThreeRanks) { RunWorld(3, "bound3"); }
TEST(GlooBoundAlgorithms, FourRanks) { RunWorld(4, "bound4"); }

}  // namespace
}  // namespace dist_test

// Drives the MPI plugin's all_gather (its own ring of point-to-point steps,
// plugins/backends/mpi/ring_all_gather.h) under mpirun and checks every
// result against values computed here from the rank and index alone.
// Usage:
//   all_gather_driver <plugin.so> <scenario> [store_dir]
// Scenarios:
//   all_gather          odd sizes x dtypes, in place and not; several ops in
//                       flight with user send/recv on the small tags in
//                       between; an op whose peer's next step only comes
//                       from polling a later op (would deadlock if only the
//                       oldest op were advanced)
//   all_gather_timeout  the last rank never joins: every other rank gets a
//                       DEADLINE_EXCEEDED naming it within the op's timeout
// Exit status 0 means every check passed on this rank.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dist/cpp/half.hpp"
#include "harness.h"

namespace mpitest {
namespace {

const dist_backend_plugin_t* P = nullptr;
int W = 1;
int R = 0;

using Bytes = std::vector<unsigned char>;

// Element i of rank r's block: small integers, exact in every dtype.
int Value(int rank, size_t i) { return static_cast<int>((rank * 131 + i * 7) % 61) - 30; }

void Put(dist_dtype_t dtype, int v, unsigned char* p) {
  switch (dtype) {
    case DIST_INT8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DIST_UINT8: {
      uint8_t x = static_cast<uint8_t>(v + 30);
      std::memcpy(p, &x, 1);
      break;
    }
    case DIST_INT32: {
      int32_t x = v;
      std::memcpy(p, &x, 4);
      break;
    }
    case DIST_INT64: {
      int64_t x = v;
      std::memcpy(p, &x, 8);
      break;
    }
    case DIST_FLOAT16: {
      auto x = dist::ToFloat16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DIST_BFLOAT16: {
      auto x = dist::ToBFloat16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DIST_FLOAT32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DIST_FLOAT64: {
      double x = v;
      std::memcpy(p, &x, 8);
      break;
    }
    default:
      break;
  }
}

// Rank r's block of n elements.
Bytes Block(dist_dtype_t dtype, int rank, size_t n) {
  const size_t size = dist_dtype_size(dtype);
  Bytes out(n * size);
  for (size_t i = 0; i < n; ++i) Put(dtype, Value(rank, i), out.data() + i * size);
  return out;
}

// What every rank must hold after all_gather: the blocks of ranks 0..W-1.
Bytes Gathered(dist_dtype_t dtype, size_t n) {
  Bytes out;
  for (int r = 0; r < W; ++r) {
    const Bytes block = Block(dtype, r, n);
    out.insert(out.end(), block.begin(), block.end());
  }
  return out;
}

dist_buffer_t Buf(unsigned char* data, size_t n, dist_dtype_t dtype) {
  return dist_make_buffer(n > 0 ? data : nullptr, n, dtype, dist_cpu());
}

dist_buffer_t NoBuf() { return dist_make_buffer(nullptr, 0, DIST_INT32, dist_cpu()); }

void Expect(const Bytes& got, const Bytes& want, const std::string& what) {
  if (got == want) return;
  size_t first = 0;
  while (first < got.size() && first < want.size() && got[first] == want[first]) ++first;
  std::fprintf(stderr, "[rank %d] MISMATCH in %s (%zu bytes, first difference at byte %zu)\n",
               g_rank, what.c_str(), got.size(), first);
  ++g_failures;
}

std::string Name(const char* what, dist_dtype_t dtype, size_t n) {
  return std::string(what) + " " + dist_dtype_name(dtype) + " x " + std::to_string(n);
}

dist_backend_comm_t* CreateWorld(dist_store_t* store, const char* name) {
  dist_comm_config_t config = MakeConfig(R, W, store, 60000, name);
  dist_backend_comm_t* comm = nullptr;
  MT_OK(P->comm_create(&config, &comm));
  MT_CHECK(comm != nullptr);
  return comm;
}

void OddSizes(dist_backend_comm_t* comm) {
  const dist_dtype_t dtypes[] = {DIST_INT8,    DIST_UINT8,    DIST_INT32,   DIST_INT64,
                                 DIST_FLOAT16, DIST_BFLOAT16, DIST_FLOAT32, DIST_FLOAT64};
  // 65537 float64 is 512 KiB + 8 per rank: past the shared-memory eager
  // limit, so the rendezvous (CMA) path runs too.
  const size_t sizes[] = {0, 1, 3, 7, 1001, 65537};
  for (dist_dtype_t dtype : dtypes) {
    for (size_t n : sizes) {
      if (n == 65537 && dtype != DIST_FLOAT64 && dtype != DIST_INT8) continue;  // keep it short
      const Bytes want = Gathered(dtype, n);
      Bytes send = Block(dtype, R, n);
      const Bytes send_before = send;
      Bytes recv(want.size(), 0xEE);
      MT_OK(RunAndWait(P, P->all_gather, comm,
                       MakeArgs(Buf(send.data(), n, dtype), Buf(recv.data(), n * W, dtype))));
      Expect(recv, want, Name("all_gather", dtype, n));
      Expect(send, send_before, Name("all_gather left send alone", dtype, n));

      // In place: send is this rank's block of recv.
      Bytes inplace(want.size(), 0xEE);
      if (!send.empty()) std::memcpy(inplace.data() + R * send.size(), send.data(), send.size());
      MT_OK(RunAndWait(P, P->all_gather, comm,
                       MakeArgs(Buf(inplace.data() + R * send.size(), n, dtype),
                                Buf(inplace.data(), n * W, dtype))));
      Expect(inplace, want, Name("all_gather in place", dtype, n));
    }
  }
}

// Three all_gathers in flight at once, user messages on the tags the
// plugin's own schedules use (their collective numbers) in between, waited
// in reverse order.
void InFlight(dist_backend_comm_t* comm) {
  const size_t sizes[] = {5, 40000, 3};
  const dist_dtype_t dtype = DIST_INT32;
  std::vector<Bytes> sends, recvs;
  for (size_t n : sizes) {
    sends.push_back(Block(dtype, R, n));
    recvs.emplace_back(n * W * 4, 0xEE);
  }
  std::vector<dist_backend_work_t*> works;
  std::vector<int64_t> out(W > 1 ? 3 : 0), in(out.size(), -1);
  std::vector<dist_backend_work_t*> p2p;
  for (size_t k = 0; k < 3; ++k) {
    dist_backend_work_t* work = nullptr;
    const dist_op_args_t gather =
        MakeArgs(Buf(sends[k].data(), sizes[k], dtype), Buf(recvs[k].data(), sizes[k] * W, dtype));
    MT_OK(P->all_gather(comm, &gather, &work));
    works.push_back(work);
    if (W > 1 && k < out.size()) {
      out[k] = R * 1000 + static_cast<int64_t>(k);
      dist_op_args_t args = MakeArgs(dist_make_buffer(&out[k], 1, DIST_INT64, dist_cpu()),
                                     dist_make_buffer(&in[k], 1, DIST_INT64, dist_cpu()));
      args.tag = static_cast<int64_t>(k);  // 0, 1, 2: the ring's tags for #k
      args.peer = (R + W - 1) % W;
      MT_OK(P->recv(comm, &args, &work));
      p2p.push_back(work);
      args.peer = (R + 1) % W;
      MT_OK(P->send(comm, &args, &work));
      p2p.push_back(work);
    }
  }
  for (size_t k = 3; k-- > 0;) {
    MT_OK(P->work_wait(works[k], 30000));
    P->work_destroy(works[k]);
    Expect(recvs[k], Gathered(dtype, sizes[k]), Name("all_gather in flight", dtype, sizes[k]));
  }
  for (dist_backend_work_t* work : p2p) {
    MT_OK(P->work_wait(work, 30000));
    P->work_destroy(work);
  }
  const int left = (R + W - 1) % W;
  for (size_t k = 0; k < in.size(); ++k) MT_CHECK(in[k] == left * 1000 + static_cast<int64_t>(k));
}

// Rank 0 waits first on a recv that rank 1 can only send after its
// all_gather finished (the send reads the gathered buffer, so the plugin
// holds it back). Rank 1's all_gather needs rank 0's ring to take its next
// steps while rank 0 waits on the recv: the plugin must advance every
// started schedule, not only the oldest op.
void AdvancedBehindOldest(dist_backend_comm_t* comm) {
  if (W < 2) return;
  const size_t n = 33;
  const dist_dtype_t dtype = DIST_INT32;
  Bytes send = Block(dtype, R, n);
  Bytes gathered(n * W * 4, 0xEE);
  const Bytes want = Gathered(dtype, n);
  dist_op_args_t gather = MakeArgs(Buf(send.data(), n, dtype), Buf(gathered.data(), n * W, dtype));
  if (R == 0) {
    Bytes from_one(want.size(), 0xEE);
    dist_op_args_t recv = MakeArgs(NoBuf(), Buf(from_one.data(), n * W, dtype));
    recv.peer = 1;
    recv.tag = 7;
    dist_backend_work_t* recv_work = nullptr;
    dist_backend_work_t* gather_work = nullptr;
    MT_OK(P->recv(comm, &recv, &recv_work));
    MT_OK(P->all_gather(comm, &gather, &gather_work));
    MT_OK(P->work_wait(recv_work, 10000));
    MT_OK(P->work_wait(gather_work, 10000));
    P->work_destroy(recv_work);
    P->work_destroy(gather_work);
    Expect(from_one, want, "rank 1's gathered buffer, sent after its all_gather");
  } else {
    dist_backend_work_t* gather_work = nullptr;
    MT_OK(P->all_gather(comm, &gather, &gather_work));
    if (R == 1) {
      dist_op_args_t send_args = MakeArgs(Buf(gathered.data(), n * W, dtype), NoBuf());
      send_args.peer = 0;
      send_args.tag = 7;
      dist_backend_work_t* send_work = nullptr;
      MT_OK(P->send(comm, &send_args, &send_work));
      MT_OK(P->work_wait(send_work, 10000));
      P->work_destroy(send_work);
    }
    MT_OK(P->work_wait(gather_work, 10000));
    P->work_destroy(gather_work);
  }
  Expect(gathered, want, "all_gather behind a recv");
}

int AllGather() {
  dist_backend_comm_t* comm = CreateWorld(nullptr, "default");
  OddSizes(comm);
  InFlight(comm);
  AdvancedBehindOldest(comm);
  // A subgroup runs its own schedules: the even ranks.
  std::vector<int32_t> evens;
  for (int r = 0; r < W; r += 2) evens.push_back(r);
  const bool member = R % 2 == 0;
  dist_comm_config_t config =
      MakeConfig(member ? R / 2 : -1, static_cast<int>(evens.size()), nullptr, 60000, "evens");
  dist_backend_comm_t* sub = nullptr;
  MT_OK(P->comm_split(comm, evens.data(), evens.size(), &config, &sub));
  MT_CHECK((sub != nullptr) == member);
  if (sub != nullptr) {
    const size_t n = 1001;
    const int sub_size = static_cast<int>(evens.size());
    Bytes send = Block(DIST_FLOAT32, R, n);
    Bytes recv(n * sub_size * 4, 0xEE);
    MT_OK(RunAndWait(
        P, P->all_gather, sub,
        MakeArgs(Buf(send.data(), n, DIST_FLOAT32), Buf(recv.data(), n * sub_size, DIST_FLOAT32))));
    Bytes want;
    for (int32_t r : evens) {
      const Bytes block = Block(DIST_FLOAT32, r, n);
      want.insert(want.end(), block.begin(), block.end());
    }
    Expect(recv, want, "all_gather on the even ranks");
    P->comm_destroy(sub);
  }
  P->comm_destroy(comm);
  return 0;
}

int AllGatherTimeout(const std::string& store_dir) {
  if (W < 2) return 0;
  DirStore store(store_dir);
  dist_backend_comm_t* comm = CreateWorld(store.store(), "default");
  dist_backend_comm_t* side = CreateWorld(nullptr, "side");
  const dist_op_args_t barrier = MakeArgs(NoBuf(), NoBuf());
  const int absent = W - 1;
  if (R != absent) {
    const size_t n = 100000;  // rendezvous-sized, so sends stay pending too
    Bytes send = Block(DIST_FLOAT32, R, n);
    Bytes recv(n * W * 4, 0xEE);
    dist_op_args_t args =
        MakeArgs(Buf(send.data(), n, DIST_FLOAT32), Buf(recv.data(), n * W, DIST_FLOAT32));
    args.timeout_ms = 1000;
    const auto start = std::chrono::steady_clock::now();
    dist_backend_work_t* work = nullptr;
    MT_OK(P->all_gather(comm, &args, &work));
    char needle[96];
    std::snprintf(needle, sizeof(needle), "rank %d has not reached it", absent);
    MT_EXPECT_ERROR(P->work_wait(work, 1500), DIST_DEADLINE_EXCEEDED, needle);
    MT_EXPECT_ERROR(P->work_wait(work, 0), DIST_DEADLINE_EXCEEDED, "all_gather #1");
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "[rank %d] timed out after %.2f s\n", R, waited);
    MT_CHECK(waited < 3.5);  // 1.5 s wait + at most the 0.25 s diagnosis grace
    P->work_destroy(work);
    P->comm_abort(comm, "all_gather timed out: rank never joined");
  }
  // The absent rank stays away until the others are done.
  MT_OK(RunAndWait(P, P->barrier, side, barrier));
  P->comm_destroy(comm);
  P->comm_destroy(side);
  return 0;
}

}  // namespace
}  // namespace mpitest

int main(int argc, char** argv) {
  using namespace mpitest;
  DriverStart start;
  if (!StartDriver(argc, argv, &start)) return 2;
  P = start.plugin;
  R = start.rank;
  W = start.world;
  const std::string& scenario = start.scenario;
  if (scenario == "all_gather") {
    AllGather();
  } else if (scenario == "all_gather_timeout") {
    AllGatherTimeout(argc > 3 ? argv[3] : "/tmp/mpi_all_gather_timeout_store");
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  if (g_failures > 0) {
    std::fprintf(stderr, "[rank %d] %s: %d check(s) failed\n", R, scenario.c_str(), g_failures);
    return 1;
  }
  std::fprintf(stderr, "[rank %d] %s: all checks passed (world size %d)\n", R, scenario.c_str(), W);
  return 0;
}

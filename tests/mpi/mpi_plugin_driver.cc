// Drives libdist-backend-mpi.so through its ABI table under mpirun (or, for
// the launch check, without it) and checks every result against values
// computed here. Usage:
//   mpi_plugin_driver <plugin.so> <scenario> [store_dir]
// Scenarios: collectives, subgroups, rank_mismatch, no_launcher, cuda,
// timeout, abort, overlap (and overlap_without_progress_thread, which must
// fail: it shows the overlap check can). Exit status 0 means every check passed on this rank.
#include <climits>
#include <cmath>
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
// The MPICH build of the plugin (else Open MPI's).
bool Mpich() { return std::strcmp(P->name, "mpich") == 0; }
int W = 1;  // world size
int R = 0;  // rank

using Bytes = std::vector<unsigned char>;

const dist_dtype_t kAllDtypes[] = {DIST_INT8,    DIST_UINT8,    DIST_INT32,   DIST_INT64,
                                   DIST_FLOAT16, DIST_BFLOAT16, DIST_FLOAT32, DIST_FLOAT64};

Bytes Encode(dist_dtype_t dtype, const std::vector<double>& values) {
  Bytes out(values.size() * dist_dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* p = out.data() + i * dist_dtype_size(dtype);
    const double v = values[i];
    switch (dtype) {
      case DIST_INT8: {
        int8_t x = static_cast<int8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DIST_UINT8: {
        uint8_t x = static_cast<uint8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DIST_INT32: {
        int32_t x = static_cast<int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DIST_INT64: {
        int64_t x = static_cast<int64_t>(v);
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
      case DIST_FLOAT64:
        std::memcpy(p, &v, 8);
        break;
      default:
        break;
    }
  }
  return out;
}

dist_buffer_t Buf(Bytes& bytes, dist_dtype_t dtype) {
  return dist_make_buffer(bytes.empty() ? nullptr : bytes.data(),
                          bytes.size() / dist_dtype_size(dtype), dtype, dist_cpu());
}

dist_buffer_t NoBuf(dist_dtype_t dtype) { return dist_make_buffer(nullptr, 0, dtype, dist_cpu()); }

void ExpectBytes(const Bytes& got, const Bytes& want, const std::string& what) {
  if (got != want) {
    std::fprintf(stderr, "[rank %d] MISMATCH in %s\n", g_rank, what.c_str());
    ++g_failures;
  }
}

std::string Name(const char* op, dist_dtype_t dtype, const char* extra = "") {
  return std::string(op) + " " + dist_dtype_name(dtype) + extra;
}

bool IsSigned(dist_dtype_t d) { return d != DIST_UINT8; }

// Inputs chosen so every reduction is exact in every dtype (small integers
// and halves), so any combining order gives the same bits.
double Input(dist_reduce_op_t op, dist_dtype_t dtype, int rank, size_t i) {
  const int k = static_cast<int>((rank * 3 + i) % 7);
  switch (op) {
    case DIST_PRODUCT: {
      static const double kSigned[] = {-1, 1, 2};
      static const double kUnsigned[] = {1, 2, 1};
      return (IsSigned(dtype) ? kSigned : kUnsigned)[(rank + i) % 3];
    }
    case DIST_BAND:
    case DIST_BOR:
    case DIST_BXOR:
      return static_cast<double>((1 << ((rank + i) % 6)) | (rank % 2 ? 3 : 64));
    default: {
      double v = IsSigned(dtype) ? k - 2 : k + 1;
      if (dist_dtype_is_floating(dtype)) v += 0.5;
      return v;
    }
  }
}

double Combine(dist_reduce_op_t op, double a, double b) {
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:
      return a + b;
    case DIST_PRODUCT:
      return a * b;
    case DIST_MIN:
      return std::min(a, b);
    case DIST_MAX:
      return std::max(a, b);
    case DIST_BAND:
      return static_cast<double>(static_cast<int64_t>(a) & static_cast<int64_t>(b));
    case DIST_BOR:
      return static_cast<double>(static_cast<int64_t>(a) | static_cast<int64_t>(b));
    case DIST_BXOR:
      return static_cast<double>(static_cast<int64_t>(a) ^ static_cast<int64_t>(b));
    default:
      return 0;
  }
}

// Reference reduction over `ranks` of element i (avg divided as the dtype
// would: truncating for integers, in float for the 16/32-bit floats).
double Expected(dist_reduce_op_t op, dist_dtype_t dtype, const std::vector<int>& ranks, size_t i) {
  double acc = Input(op, dtype, ranks[0], i);
  for (size_t k = 1; k < ranks.size(); ++k) acc = Combine(op, acc, Input(op, dtype, ranks[k], i));
  if (op != DIST_AVG) return acc;
  const double n = static_cast<double>(ranks.size());
  if (!dist_dtype_is_floating(dtype)) return std::trunc(acc / n);
  if (dtype == DIST_FLOAT64) return acc / n;
  return static_cast<double>(static_cast<float>(acc) / static_cast<float>(ranks.size()));
}

std::vector<int> AllRanks() {
  std::vector<int> r(W);
  for (int i = 0; i < W; ++i) r[i] = i;
  return r;
}

std::vector<double> Inputs(dist_reduce_op_t op, dist_dtype_t dtype, int rank, size_t n,
                           size_t offset = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Input(op, dtype, rank, offset + i);
  return v;
}

std::vector<double> Expecteds(dist_reduce_op_t op, dist_dtype_t dtype, size_t n,
                              size_t offset = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Expected(op, dtype, AllRanks(), offset + i);
  return v;
}

// Distinct per rank and element, exact in every dtype.
std::vector<double> Pattern(int rank, size_t n, size_t offset = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rank * 10 + static_cast<double>((offset + i) % 10);
  return v;
}

void TestAllReduce(dist_backend_comm_t* comm) {
  // 7 and 1000 elements: both within the recursive-doubling schedule's
  // size on 2 and 4 ranks (recursive_doubling_all_reduce.h), libnbc's
  // otherwise.
  for (size_t n : {size_t{7}, size_t{1000}}) {
    for (dist_dtype_t dtype : kAllDtypes) {
      for (int o = 0; o < DIST_REDUCE_OP_COUNT; ++o) {
        const auto op = static_cast<dist_reduce_op_t>(o);
        Bytes send = Encode(dtype, Inputs(op, dtype, R, n));
        Bytes recv(send.size(), 0xEE);
        dist_op_args_t args = MakeArgs(Buf(send, dtype), Buf(recv, dtype));
        args.op = op;
        if (dist_dtype_is_floating(dtype) &&
            (op == DIST_BAND || op == DIST_BOR || op == DIST_BXOR)) {
          dist_backend_work_t* work = nullptr;
          MT_EXPECT_ERROR(P->all_reduce(comm, &args, &work), DIST_INVALID_ARGUMENT, "bitwise");
          continue;
        }
        MT_OK(RunAndWait(P, P->all_reduce, comm, args));
        const Bytes want = Encode(dtype, Expecteds(op, dtype, n));
        ExpectBytes(recv, want, Name("all_reduce", dtype, dist_reduce_op_name(op)));
        // In place.
        args = MakeArgs(Buf(send, dtype), Buf(send, dtype));
        args.op = op;
        MT_OK(RunAndWait(P, P->all_reduce, comm, args));
        ExpectBytes(send, want, Name("all_reduce in place", dtype, dist_reduce_op_name(op)));
      }
    }
  }
}

void TestRooted(dist_backend_comm_t* comm) {
  const size_t n = 5;
  for (dist_dtype_t dtype : kAllDtypes) {
    for (int root = 0; root < W; ++root) {
      // broadcast, separate send on root, and in place.
      Bytes mine = Encode(dtype, Pattern(R, n));
      Bytes recv(mine.size(), 0xEE);
      dist_op_args_t args = MakeArgs(R == root ? Buf(mine, dtype) : NoBuf(dtype), Buf(recv, dtype));
      args.root = root;
      MT_OK(RunAndWait(P, P->broadcast, comm, args));
      ExpectBytes(recv, Encode(dtype, Pattern(root, n)), Name("broadcast", dtype));
      args = MakeArgs(Buf(mine, dtype), Buf(mine, dtype));
      args.root = root;
      MT_OK(RunAndWait(P, P->broadcast, comm, args));
      ExpectBytes(mine, Encode(dtype, Pattern(root, n)), Name("broadcast in place", dtype));

      // reduce sum and avg.
      for (dist_reduce_op_t op : {DIST_SUM, DIST_AVG, DIST_MAX}) {
        Bytes send = Encode(dtype, Inputs(op, dtype, R, n));
        Bytes out(send.size(), 0xEE);
        args = MakeArgs(Buf(send, dtype), R == root ? Buf(out, dtype) : NoBuf(dtype));
        args.op = op;
        args.root = root;
        MT_OK(RunAndWait(P, P->reduce, comm, args));
        if (R == root) {
          ExpectBytes(out, Encode(dtype, Expecteds(op, dtype, n)),
                      Name("reduce", dtype, dist_reduce_op_name(op)));
        }
      }

      // gather and scatter.
      Bytes send = Encode(dtype, Pattern(R, n));
      Bytes all(send.size() * W, 0xEE);
      args = MakeArgs(Buf(send, dtype), R == root ? Buf(all, dtype) : NoBuf(dtype));
      args.root = root;
      MT_OK(RunAndWait(P, P->gather, comm, args));
      Bytes want_all;
      for (int r = 0; r < W; ++r) {
        Bytes block = Encode(dtype, Pattern(r, n));
        want_all.insert(want_all.end(), block.begin(), block.end());
      }
      if (R == root) ExpectBytes(all, want_all, Name("gather", dtype));

      Bytes source = want_all;
      Bytes part(send.size(), 0xEE);
      args = MakeArgs(R == root ? Buf(source, dtype) : NoBuf(dtype), Buf(part, dtype));
      args.root = root;
      MT_OK(RunAndWait(P, P->scatter, comm, args));
      ExpectBytes(part, Encode(dtype, Pattern(R, n)), Name("scatter", dtype));
    }
  }
}

void TestAllGatherReduceScatterAllToAll(dist_backend_comm_t* comm) {
  const size_t n = 6;
  for (dist_dtype_t dtype : kAllDtypes) {
    Bytes want_all;
    for (int r = 0; r < W; ++r) {
      Bytes block = Encode(dtype, Pattern(r, n));
      want_all.insert(want_all.end(), block.begin(), block.end());
    }
    Bytes send = Encode(dtype, Pattern(R, n));
    Bytes all(send.size() * W, 0xEE);
    MT_OK(RunAndWait(P, P->all_gather, comm, MakeArgs(Buf(send, dtype), Buf(all, dtype))));
    ExpectBytes(all, want_all, Name("all_gather", dtype));
    // In place: send is this rank's block of recv.
    Bytes inplace(send.size() * W, 0xEE);
    std::memcpy(inplace.data() + R * send.size(), send.data(), send.size());
    dist_buffer_t block = Buf(inplace, dtype);
    block.data = inplace.data() + R * send.size();
    block.count = n;
    MT_OK(RunAndWait(P, P->all_gather, comm, MakeArgs(block, Buf(inplace, dtype))));
    ExpectBytes(inplace, want_all, Name("all_gather in place", dtype));

    for (dist_reduce_op_t op : {DIST_SUM, DIST_AVG, DIST_MIN}) {
      Bytes big = Encode(dtype, Inputs(op, dtype, R, n * W));
      Bytes mine(send.size(), 0xEE);
      dist_op_args_t args = MakeArgs(Buf(big, dtype), Buf(mine, dtype));
      args.op = op;
      MT_OK(RunAndWait(P, P->reduce_scatter, comm, args));
      const Bytes want = Encode(dtype, Expecteds(op, dtype, n, R * n));
      ExpectBytes(mine, want, Name("reduce_scatter", dtype, dist_reduce_op_name(op)));
      // NCCL's in-place layout: recv is this rank's block of send.
      big = Encode(dtype, Inputs(op, dtype, R, n * W));
      dist_buffer_t recv_block = Buf(big, dtype);
      recv_block.data = big.data() + R * send.size();
      recv_block.count = n;
      args = MakeArgs(Buf(big, dtype), recv_block);
      args.op = op;
      MT_OK(RunAndWait(P, P->reduce_scatter, comm, args));
      ExpectBytes(Bytes(big.begin() + R * send.size(), big.begin() + (R + 1) * send.size()), want,
                  Name("reduce_scatter in place", dtype, dist_reduce_op_name(op)));
    }

    // all_to_all: block j of rank r holds r*10+j; rank j receives r*10+j
    // from every r.
    std::vector<double> out_values, want_values;
    for (int j = 0; j < W; ++j) {
      for (size_t i = 0; i < n; ++i) {
        out_values.push_back(R * 10 + j);
        want_values.push_back(j * 10 + R);
      }
    }
    Bytes a2a_send = Encode(dtype, out_values);
    Bytes a2a_recv(a2a_send.size(), 0xEE);
    MT_OK(RunAndWait(P, P->all_to_all, comm, MakeArgs(Buf(a2a_send, dtype), Buf(a2a_recv, dtype))));
    ExpectBytes(a2a_recv, Encode(dtype, want_values), Name("all_to_all", dtype));
    // In place is refused, as on every backend (dist/cpp/validate.hpp).
    dist_op_args_t in_place = MakeArgs(Buf(a2a_send, dtype), Buf(a2a_send, dtype));
    dist_backend_work_t* refused = nullptr;
    MT_EXPECT_ERROR(P->all_to_all(comm, &in_place, &refused), DIST_INVALID_ARGUMENT,
                    "does not run in place");
  }
}

void TestSendRecv(dist_backend_comm_t* comm) {
  if (W < 2) return;
  // A ring: send to the right with tag 100+rank, receive from the left; a
  // second message with another tag goes first in the other direction.
  const int right = (R + 1) % W;
  const int left = (R + W - 1) % W;
  std::vector<int64_t> out = {R, R * 2, R * 3};
  std::vector<int64_t> in(3, -1);
  std::vector<int64_t> out2 = {R + 1000};
  std::vector<int64_t> in2(1, -1);
  dist_op_args_t recv_args =
      MakeArgs(NoBuf(DIST_INT64), dist_make_buffer(in.data(), 3, DIST_INT64, dist_cpu()));
  recv_args.peer = left;
  recv_args.tag = 100 + left;
  dist_op_args_t recv2_args =
      MakeArgs(NoBuf(DIST_INT64), dist_make_buffer(in2.data(), 1, DIST_INT64, dist_cpu()));
  recv2_args.peer = right;
  recv2_args.tag = 7;
  dist_op_args_t send_args =
      MakeArgs(dist_make_buffer(out.data(), 3, DIST_INT64, dist_cpu()), NoBuf(DIST_INT64));
  send_args.peer = right;
  send_args.tag = 100 + R;
  dist_op_args_t send2_args =
      MakeArgs(dist_make_buffer(out2.data(), 1, DIST_INT64, dist_cpu()), NoBuf(DIST_INT64));
  send2_args.peer = left;
  send2_args.tag = 7;
  dist_backend_work_t *w1, *w2, *w3, *w4;
  MT_OK(P->recv(comm, &recv_args, &w1));
  MT_OK(P->recv(comm, &recv2_args, &w2));
  MT_OK(P->send(comm, &send_args, &w3));
  MT_OK(P->send(comm, &send2_args, &w4));
  for (dist_backend_work_t* w : {w4, w3, w2, w1}) {
    MT_OK(P->work_wait(w, 30000));
    P->work_destroy(w);
  }
  MT_CHECK(in[0] == left && in[1] == left * 2 && in[2] == left * 3);
  MT_CHECK(in2[0] == right + 1000);
  // A bad tag is refused at once.
  send_args.tag = -1;
  dist_backend_work_t* work = nullptr;
  MT_EXPECT_ERROR(P->send(comm, &send_args, &work), DIST_INVALID_ARGUMENT, "tag -1");
}

// Async: several ops in flight, one chained on another's output, waited in
// reverse order; work_test until done.
void TestAsync(dist_backend_comm_t* comm) {
  const size_t n = 1 << 18;  // 1 MiB of float32: the ring algorithm on < 4 ranks
  std::vector<float> a(n), b(n, static_cast<float>(R + 1)), c(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<float>((i % 13) + R);
  dist_buffer_t ab = dist_make_buffer(a.data(), n, DIST_FLOAT32, dist_cpu());
  dist_buffer_t bb = dist_make_buffer(b.data(), n, DIST_FLOAT32, dist_cpu());
  dist_buffer_t cb = dist_make_buffer(c.data(), n, DIST_FLOAT32, dist_cpu());
  dist_op_args_t first = MakeArgs(ab, ab);  // a = sum(a), in place
  first.op = DIST_SUM;
  dist_op_args_t second = MakeArgs(ab, cb);  // c = sum(a) again: needs first done
  second.op = DIST_SUM;
  dist_op_args_t third = MakeArgs(bb, bb);  // independent
  third.op = DIST_MAX;
  dist_backend_work_t *w1, *w2, *w3;
  MT_OK(P->all_reduce(comm, &first, &w1));
  MT_OK(P->all_reduce(comm, &second, &w2));
  MT_OK(P->all_reduce(comm, &third, &w3));
  int done = 0;
  for (int spins = 0; !done && spins < 100000000; ++spins) MT_OK(P->work_test(w3, &done));
  MT_CHECK(done == 1);
  MT_OK(P->work_wait(w2, 30000));
  MT_OK(P->work_wait(w1, 30000));
  for (auto* w : {w1, w2, w3}) P->work_destroy(w);
  bool ok = true;
  for (size_t i = 0; i < n && ok; ++i) {
    double s = 0;
    for (int r = 0; r < W; ++r) s += static_cast<double>((i % 13) + r);
    ok = a[i] == static_cast<float>(s) && c[i] == static_cast<float>(s * W) && b[i] == W;
  }
  MT_CHECK(ok);
}

void TestHalfAverage(dist_backend_comm_t* comm) {
  // float16/bfloat16 avg of values whose sum is exact in the dtype (so any
  // combining order agrees) but whose mean needs rounding (1/W).
  for (dist_dtype_t dtype : {DIST_FLOAT16, DIST_BFLOAT16}) {
    std::vector<double> mine = {R + 0.25, 10.0 + R, -3.5 * (R + 1), R == 0 ? 1.0 : 0.0};
    Bytes send = Encode(dtype, mine);
    Bytes recv(send.size(), 0);
    dist_op_args_t args = MakeArgs(Buf(send, dtype), Buf(recv, dtype));
    args.op = DIST_AVG;
    MT_OK(RunAndWait(P, P->all_reduce, comm, args));
    std::vector<double> want(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      float sum = 0;
      for (int r = 0; r < W; ++r) {
        const double v = i == 0 ? r + 0.25 : i == 1 ? 10.0 + r : i == 2 ? -3.5 * (r + 1) : r == 0;
        sum += static_cast<float>(v);
      }
      want[i] = sum / static_cast<float>(W);
    }
    ExpectBytes(recv, Encode(dtype, want), Name("all_reduce avg", dtype));
  }
}

void CheckCapabilities() {
  dist_backend_capabilities_t caps;
  std::memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  P->get_capabilities(&caps);
  MT_CHECK(caps.dtypes == 0xffu);
  MT_CHECK(caps.collectives == (1u << DIST_COLLECTIVE_COUNT) - 1);
  MT_CHECK(caps.flags & DIST_CAP_SUBGROUPS);
  MT_CHECK(caps.flags & DIST_CAP_THREAD_MULTIPLE);  // Debian's Open MPI 4.1 provides it
  MT_CHECK(!(caps.flags & DIST_CAP_CUDA_AWARE));
  MT_CHECK(caps.notes != nullptr && std::strstr(caps.notes, "MPI_THREAD_MULTIPLE") != nullptr);
  // Each build reports its own implementation (Debian 12: Open MPI 4.1.4, MPICH 4.0.2).
  MT_CHECK(std::strncmp(P->library_version(), Mpich() ? "MPICH 4.0" : "Open MPI v4.1",
                        Mpich() ? 9 : 13) == 0);
  MT_CHECK(std::strchr(P->library_version(), '\n') == nullptr);
  MT_CHECK(P->probe() == nullptr);
}

dist_backend_comm_t* CreateWorld(dist_store_t* store, int64_t timeout_ms = 60000) {
  dist_comm_config_t config = MakeConfig(R, W, store, timeout_ms, "default");
  dist_backend_comm_t* comm = nullptr;
  MT_OK(P->comm_create(&config, &comm));
  MT_CHECK(comm != nullptr);
  return comm;
}

int Collectives() {
  dist_backend_comm_t* comm = CreateWorld(nullptr);
  CheckCapabilities();
  TestAllReduce(comm);
  TestRooted(comm);
  TestAllGatherReduceScatterAllToAll(comm);
  TestSendRecv(comm);
  TestAsync(comm);
  TestHalfAverage(comm);
  MT_OK(RunAndWait(P, P->barrier, comm, MakeArgs(NoBuf(DIST_UINT8), NoBuf(DIST_UINT8))));
  // Shape errors are clear.
  std::vector<float> x(4), y(3);
  dist_op_args_t bad = MakeArgs(dist_make_buffer(x.data(), 4, DIST_FLOAT32, dist_cpu()),
                                dist_make_buffer(y.data(), 3, DIST_FLOAT32, dist_cpu()));
  dist_backend_work_t* work = nullptr;
  MT_EXPECT_ERROR(P->all_reduce(comm, &bad, &work), DIST_INVALID_ARGUMENT,
                  "recv count is 3 but must be 4");
  P->comm_destroy(comm);
  return 0;
}

int Subgroups() {
  dist_backend_comm_t* world = CreateWorld(nullptr);
  // Even ranks; odd ranks are non-members and must get NULL.
  std::vector<int32_t> evens;
  for (int r = 0; r < W; r += 2) evens.push_back(r);
  const bool member = R % 2 == 0;
  dist_comm_config_t config =
      MakeConfig(member ? R / 2 : -1, static_cast<int>(evens.size()), nullptr, 60000, "evens");
  dist_backend_comm_t* sub = reinterpret_cast<dist_backend_comm_t*>(0x1);
  MT_OK(P->comm_split(world, evens.data(), evens.size(), &config, &sub));
  if (!member) {
    MT_CHECK(sub == nullptr);
  } else {
    MT_CHECK(sub != nullptr);
    int64_t v = 100 + R;
    dist_op_args_t args = MakeArgs(dist_make_buffer(&v, 1, DIST_INT64, dist_cpu()),
                                   dist_make_buffer(&v, 1, DIST_INT64, dist_cpu()));
    args.op = DIST_SUM;
    MT_OK(RunAndWait(P, P->all_reduce, sub, args));
    int64_t want = 0;
    for (int32_t r : evens) want += 100 + r;
    MT_CHECK(v == want);
    // Root 0 of the subgroup is world rank 0.
    int64_t b = R == 0 ? 42 : -1;
    dist_op_args_t bargs = MakeArgs(dist_make_buffer(&b, 1, DIST_INT64, dist_cpu()),
                                    dist_make_buffer(&b, 1, DIST_INT64, dist_cpu()));
    MT_OK(RunAndWait(P, P->broadcast, sub, bargs));
    MT_CHECK(b == 42);
  }
  // A group of the top ranks in reverse world order is not allowed by the
  // ABI (ascending), so use the last W-1 ranks: new rank = world rank - 1.
  if (W >= 2) {
    std::vector<int32_t> tail;
    for (int r = 1; r < W; ++r) tail.push_back(r);
    dist_comm_config_t tail_config = MakeConfig(R >= 1 ? R - 1 : -1, W - 1, nullptr, 60000, "tail");
    dist_backend_comm_t* tail_comm = nullptr;
    MT_OK(P->comm_split(world, tail.data(), tail.size(), &tail_config, &tail_comm));
    MT_CHECK((tail_comm != nullptr) == (R >= 1));
    if (tail_comm != nullptr) {
      int32_t mine = R * R;
      std::vector<int32_t> all(W - 1, -1);
      MT_OK(RunAndWait(P, P->all_gather, tail_comm,
                       MakeArgs(dist_make_buffer(&mine, 1, DIST_INT32, dist_cpu()),
                                dist_make_buffer(all.data(), W - 1, DIST_INT32, dist_cpu()))));
      for (int k = 0; k < W - 1; ++k) MT_CHECK(all[k] == (k + 1) * (k + 1));
      P->comm_destroy(tail_comm);
    }
  }
  // The parent still works after the splits.
  int32_t one = 1;
  dist_op_args_t args = MakeArgs(dist_make_buffer(&one, 1, DIST_INT32, dist_cpu()),
                                 dist_make_buffer(&one, 1, DIST_INT32, dist_cpu()));
  MT_OK(RunAndWait(P, P->all_reduce, world, args));
  MT_CHECK(one == W);
  if (sub != nullptr && member) P->comm_destroy(sub);
  P->comm_destroy(world);
  return 0;
}

int RankMismatch() {
  // The init method claims a different rank / size than mpirun gave.
  dist_comm_config_t config = MakeConfig((R + 1) % (W + 1), W + 1, nullptr, 10000, "default");
  dist_backend_comm_t* comm = nullptr;
  MT_EXPECT_ERROR(P->comm_create(&config, &comm), DIST_FAILED_PRECONDITION,
                  "MPI_COMM_WORLD says rank");
  MT_CHECK(comm == nullptr);
  return 0;
}

int NoLauncher() {
  // Run without mpirun: world size 2 cannot come from anywhere.
  dist_comm_config_t config = MakeConfig(0, 2, nullptr, 10000, "default");
  dist_backend_comm_t* comm = nullptr;
  MT_EXPECT_ERROR(P->comm_create(&config, &comm), DIST_FAILED_PRECONDITION,
                  Mpich() ? "mpiexec.mpich -n 2" : "mpirun -np 2");
  // World size 1 runs as an MPI singleton.
  config = MakeConfig(0, 1, nullptr, 10000, "default");
  MT_OK(P->comm_create(&config, &comm));
  double v = 2.5;
  dist_op_args_t args = MakeArgs(dist_make_buffer(&v, 1, DIST_FLOAT64, dist_cpu()),
                                 dist_make_buffer(&v, 1, DIST_FLOAT64, dist_cpu()));
  args.op = DIST_AVG;
  MT_OK(RunAndWait(P, P->all_reduce, comm, args));
  MT_CHECK(v == 2.5);
  P->comm_destroy(comm);
  return 0;
}

int Cuda() {
  dist_backend_comm_t* comm = CreateWorld(nullptr);
  // The pointer is never touched: the check happens before any MPI call.
  dist_buffer_t cuda =
      dist_make_buffer(reinterpret_cast<void*>(0x7f0000001000), 16, DIST_FLOAT32, dist_cuda(0));
  dist_op_args_t args = MakeArgs(cuda, cuda);
  dist_backend_work_t* work = nullptr;
  MT_EXPECT_ERROR(P->all_reduce(comm, &args, &work), DIST_UNIMPLEMENTED, "nccl");
  MT_CHECK(work == nullptr);
  P->comm_destroy(comm);
  return 0;
}

// Work progresses while the caller computes without calling into dist: an
// 8 MiB all_reduce (many libnbc rounds, rendezvous transfers) is issued, the
// caller "computes" for 1.5 s, and a single work_test must find it done,
// which only the plugin's progress thread can have achieved.
int Overlap(bool progress_thread) {
  if (W < 2) return 0;
  const dist_kv_t option = {"mpi.progress_thread", progress_thread ? "1" : "0"};
  dist_comm_config_t config = MakeConfig(R, W, nullptr, 60000, "default");
  config.options = &option;
  config.num_options = 1;
  dist_backend_comm_t* comm = nullptr;
  MT_OK(P->comm_create(&config, &comm));
  std::vector<float> x(2 << 20, static_cast<float>(R + 1));
  dist_op_args_t args = MakeArgs(dist_make_buffer(x.data(), x.size(), DIST_FLOAT32, dist_cpu()),
                                 dist_make_buffer(x.data(), x.size(), DIST_FLOAT32, dist_cpu()));
  args.op = DIST_SUM;
  dist_backend_work_t* work = nullptr;
  MT_OK(P->all_reduce(comm, &args, &work));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  int done = 0;
  MT_OK(P->work_test(work, &done));
  std::fprintf(stderr, "[rank %d] overlap: done after compute = %d\n", R, done);
  MT_CHECK(done == 1);
  MT_OK(P->work_wait(work, 30000));
  P->work_destroy(work);
  MT_CHECK(x[0] == static_cast<float>(W * (W + 1) / 2) && x.back() == x[0]);
  P->comm_destroy(comm);
  return 0;
}

int Timeout(const std::string& store_dir) {
  if (W < 2) return 0;
  DirStore store(store_dir);
  dist_backend_comm_t* comm = CreateWorld(store.store(), 60000);
  const int late = W - 1;
  float v = 1.0f;
  dist_op_args_t args = MakeArgs(dist_make_buffer(&v, 1, DIST_FLOAT32, dist_cpu()),
                                 dist_make_buffer(&v, 1, DIST_FLOAT32, dist_cpu()));
  args.op = DIST_SUM;
  args.timeout_ms = 1000;
  if (R == late) std::this_thread::sleep_for(std::chrono::seconds(4));
  dist_backend_work_t* work = nullptr;
  MT_OK(P->all_reduce(comm, &args, &work));
  if (R != late) {
    const auto start = std::chrono::steady_clock::now();
    char needle[64];
    std::snprintf(needle, sizeof(needle), "rank %d has not reached it", late);
    MT_EXPECT_ERROR(P->work_wait(work, 1500), DIST_DEADLINE_EXCEEDED, needle);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    MT_CHECK(waited < 3.5);  // 1.5 s wait + at most the 0.25 s diagnosis grace
  }
  // The op stays pending and completes once the late rank comes.
  MT_OK(P->work_wait(work, 30000));
  P->work_destroy(work);
  MT_CHECK(v == static_cast<float>(W));
  P->comm_destroy(comm);
  return 0;
}

int Abort() {
  if (W < 2) return 0;
  dist_backend_comm_t* comm = CreateWorld(nullptr);
  dist_backend_comm_t* side = CreateWorld(nullptr);
  float v = 1.0f;
  dist_op_args_t args = MakeArgs(dist_make_buffer(&v, 1, DIST_FLOAT32, dist_cpu()),
                                 dist_make_buffer(&v, 1, DIST_FLOAT32, dist_cpu()));
  args.op = DIST_SUM;
  const dist_op_args_t barrier = MakeArgs(NoBuf(DIST_UINT8), NoBuf(DIST_UINT8));
  if (R == 0) {
    dist_backend_work_t* work = nullptr;
    MT_OK(P->all_reduce(comm, &args, &work));
    P->comm_abort(comm, "test abort from rank 0");
    P->comm_abort(comm, "second abort is a no-op");
    MT_EXPECT_ERROR(P->work_wait(work, 5000), DIST_ABORTED, "test abort from rank 0");
    P->work_destroy(work);
    dist_backend_work_t* later = nullptr;
    MT_EXPECT_ERROR(P->all_reduce(comm, &args, &later), DIST_ABORTED, "test abort from rank 0");
    MT_OK(RunAndWait(P, P->barrier, side, barrier));
  } else {
    // The others come late so that rank 0's abandoned request can finish
    // inside MPI before it destroys the communicator.
    MT_OK(RunAndWait(P, P->barrier, side, barrier));
    MT_OK(RunAndWait(P, P->all_reduce, comm, args));
  }
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
  if (scenario == "collectives")
    Collectives();
  else if (scenario == "subgroups")
    Subgroups();
  else if (scenario == "rank_mismatch")
    RankMismatch();
  else if (scenario == "no_launcher")
    NoLauncher();
  else if (scenario == "cuda")
    Cuda();
  else if (scenario == "timeout")
    Timeout(argc > 3 ? argv[3] : "/tmp/mpi_timeout_store");
  else if (scenario == "abort")
    Abort();
  else if (scenario == "overlap")
    Overlap(true);
  else if (scenario == "overlap_without_progress_thread")
    Overlap(false);  // must fail
  else {
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

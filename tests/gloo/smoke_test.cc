// Several collectives on three real ranks, each checked against values
// computed here from the inputs' formulas; plus the issue-time errors and
// the plugin's static description.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/gloo/gloo_suite.h"

namespace dist_test {
namespace {

constexpr int kWorld = 3;

// float16 / bfloat16 bit patterns of small exact values.
uint16_t Half(float v) {  // only 0.5 steps in [0, 8) are used
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (v == 0) return 0;
  const uint32_t exponent = ((bits >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>((exponent << 10) | ((bits >> 13) & 0x3ff));
}
uint16_t BFloat(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>(bits >> 16);  // exact for small integers
}

int SmokeRank(int rank, const std::string& dir) {
  const dist_backend_plugin_t* p = Plugin();
  dist_store_t* store = OpenStore(dir + "/store");
  dist_backend_comm_t* comm = nullptr;
  RANK_OK(rank, CreateComm(store, rank, kWorld, CommOptions{}, &comm));
  const int w = kWorld;

  {  // all_reduce int32 sum, out of place, odd size
    const int n = 1007;
    std::vector<int32_t> in(n), out(n, -1);
    for (int i = 0; i < n; ++i) in[i] = rank * 100 + i;
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), n, DIST_INT32);
    a.recv = Buffer(out.data(), n, DIST_INT32);
    a.op = DIST_SUM;
    RANK_OK(rank, RunOp(p->all_reduce, comm, a));
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[i] == 300 + 3 * i);
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, in[i] == rank * 100 + i);  // input untouched
  }
  {  // all_reduce float16 avg, in place: (0.5 + 1 + 1.5) / 3 = 1
    const int n = 65;
    std::vector<uint16_t> data(n, Half(0.5f * (rank + 1)));
    dist_op_args_t a = Args();
    a.send = a.recv = Buffer(data.data(), n, DIST_FLOAT16);
    a.op = DIST_AVG;
    RANK_OK(rank, RunOp(p->all_reduce, comm, a));
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, data[i] == Half(1.0f));
  }
  {  // float16 sum rounds once: 1 + 2^-11 + 2^-11 is 1 + 2^-10 when summed in
     // float, but 1 if each partial sum were rounded to float16 (ties to even).
    std::vector<uint16_t> in(7, rank == 0 ? Half(1.0f) : Half(1.0f / 2048)), out(7);
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), 7, DIST_FLOAT16);
    a.recv = Buffer(out.data(), 7, DIST_FLOAT16);
    a.op = DIST_SUM;
    RANK_OK(rank, RunOp(p->all_reduce, comm, a));
    for (uint16_t v : out) RANK_CHECK(rank, v == 0x3C01);  // 1 + 2^-10
  }
  {  // all_reduce int64 bxor
    const int n = 33;
    std::vector<int64_t> in(n), out(n);
    for (int i = 0; i < n; ++i) in[i] = (int64_t{1} << rank) | (int64_t{i} << 8);
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), n, DIST_INT64);
    a.recv = Buffer(out.data(), n, DIST_INT64);
    a.op = DIST_BXOR;
    RANK_OK(rank, RunOp(p->all_reduce, comm, a));
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[i] == (7 ^ (int64_t{i} << 8)));
  }
  {  // all_reduce bfloat16 max
    const int n = 40;
    std::vector<uint16_t> in(n), out(n);
    for (int i = 0; i < n; ++i) in[i] = BFloat(static_cast<float>(rank + i % 5));
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), n, DIST_BFLOAT16);
    a.recv = Buffer(out.data(), n, DIST_BFLOAT16);
    a.op = DIST_MAX;
    RANK_OK(rank, RunOp(p->all_reduce, comm, a));
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[i] == BFloat(static_cast<float>(2 + i % 5)));
  }
  {  // broadcast uint8 from root 1
    const int n = 300;
    std::vector<uint8_t> src(n), out(n, 0);
    for (int i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
    dist_op_args_t a = Args();
    a.send = Buffer(rank == 1 ? src.data() : nullptr, rank == 1 ? n : 0, DIST_UINT8);
    a.recv = Buffer(out.data(), n, DIST_UINT8);
    a.root = 1;
    RANK_OK(rank, RunOp(p->broadcast, comm, a));
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[i] == static_cast<uint8_t>(i * 7 + 1));
  }
  {  // reduce float64 product to root 2: 1 * 2 * 3
    const int n = 17;
    std::vector<double> in(n, rank + 1.0), out(n, 0.0);
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), n, DIST_FLOAT64);
    a.recv = Buffer(rank == 2 ? out.data() : nullptr, rank == 2 ? n : 0, DIST_FLOAT64);
    a.op = DIST_PRODUCT;
    a.root = 2;
    RANK_OK(rank, RunOp(p->reduce, comm, a));
    if (rank == 2) {
      for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[i] == 6.0);
    }
  }
  {  // all_gather int8, in place: send is this rank's block of recv
    const int n = 11;
    std::vector<int8_t> all(n * w, -1);
    for (int i = 0; i < n; ++i) all[rank * n + i] = static_cast<int8_t>(rank * 10 + i % 7);
    dist_op_args_t a = Args();
    a.send = Buffer(all.data() + rank * n, n, DIST_INT8);
    a.recv = Buffer(all.data(), n * w, DIST_INT8);
    RANK_OK(rank, RunOp(p->all_gather, comm, a));
    for (int r = 0; r < w; ++r)
      for (int i = 0; i < n; ++i) RANK_CHECK(rank, all[r * n + i] == r * 10 + i % 7);
  }
  {  // gather float32 to root 0
    const int n = 9;
    std::vector<float> in(n), out(n * w, -1.f);
    for (int i = 0; i < n; ++i) in[i] = rank + i * 0.25f;
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), n, DIST_FLOAT32);
    a.recv = Buffer(rank == 0 ? out.data() : nullptr, rank == 0 ? n * w : 0, DIST_FLOAT32);
    a.root = 0;
    RANK_OK(rank, RunOp(p->gather, comm, a));
    if (rank == 0) {
      for (int r = 0; r < w; ++r)
        for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[r * n + i] == r + i * 0.25f);
    }
  }
  {  // scatter int32 from root 2
    const int n = 6;
    std::vector<int32_t> src(n * w), out(n, -1);
    for (int j = 0; j < n * w; ++j) src[j] = 1000 + j;
    dist_op_args_t a = Args();
    a.send = Buffer(rank == 2 ? src.data() : nullptr, rank == 2 ? n * w : 0, DIST_INT32);
    a.recv = Buffer(out.data(), n, DIST_INT32);
    a.root = 2;
    RANK_OK(rank, RunOp(p->scatter, comm, a));
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[i] == 1000 + rank * n + i);
  }
  {  // reduce_scatter int32 sum
    const int n = 5;
    std::vector<int32_t> in(n * w), out(n, -1);
    for (int j = 0; j < n * w; ++j) in[j] = rank * 1000 + j;
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), n * w, DIST_INT32);
    a.recv = Buffer(out.data(), n, DIST_INT32);
    a.op = DIST_SUM;
    RANK_OK(rank, RunOp(p->reduce_scatter, comm, a));
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[i] == 3000 + 3 * (rank * n + i));
  }
  {  // all_to_all int64: block j of rank r goes to rank j
    const int n = 4;
    std::vector<int64_t> in(n * w), out(n * w, -1);
    for (int j = 0; j < w; ++j)
      for (int i = 0; i < n; ++i) in[j * n + i] = rank * 1000 + j * 10 + i;
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), n * w, DIST_INT64);
    a.recv = Buffer(out.data(), n * w, DIST_INT64);
    RANK_OK(rank, RunOp(p->all_to_all, comm, a));
    for (int src = 0; src < w; ++src)
      for (int i = 0; i < n; ++i) RANK_CHECK(rank, out[src * n + i] == src * 1000 + rank * 10 + i);
  }
  RANK_OK(rank, RunOp(p->barrier, comm, Args()));
  {  // send/recv around the ring, both issued before either is waited for
    const int n = 21;
    std::vector<int32_t> mine(n), theirs(n, -1);
    for (int i = 0; i < n; ++i) mine[i] = rank * 50 + i;
    dist_op_args_t s = Args();
    s.send = Buffer(mine.data(), n, DIST_INT32);
    s.peer = (rank + 1) % w;
    s.tag = 7;
    dist_op_args_t r = Args();
    r.recv = Buffer(theirs.data(), n, DIST_INT32);
    r.peer = (rank + w - 1) % w;
    r.tag = 7;
    dist_backend_work_t* send_work = nullptr;
    dist_backend_work_t* recv_work = nullptr;
    RANK_OK(rank, p->send(comm, &s, &send_work));
    RANK_OK(rank, p->recv(comm, &r, &recv_work));
    RANK_OK(rank, p->work_wait(send_work, 20000));
    RANK_OK(rank, p->work_wait(recv_work, 20000));
    p->work_destroy(send_work);
    p->work_destroy(recv_work);
    const int from = (rank + w - 1) % w;
    for (int i = 0; i < n; ++i) RANK_CHECK(rank, theirs[i] == from * 50 + i);
  }
  p->comm_destroy(comm);
  store->release(store->ctx);
  return 0;
}

TEST(GlooSmoke, CollectivesOnThreeRanks) {
  const std::string dir = TempDir("smoke");
  for (const RankResult& r :
       RunRanks(kWorld, absl::Seconds(90), [&](int rank) { return SmokeRank(rank, dir); })) {
    EXPECT_TRUE(r.ok()) << r.Describe();
  }
}

TEST(GlooSmoke, SingleRankGroup) {
  const std::string dir = TempDir("single");
  auto results = RunRanks(1, absl::Seconds(30), [&](int rank) {
    dist_store_t* store = OpenStore(dir + "/store");
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, 0, 1, CommOptions{}, &comm));
    std::vector<float> in = {1.5f, -2.f, 3.f}, out(3, 0.f);
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), 3, DIST_FLOAT32);
    a.recv = Buffer(out.data(), 3, DIST_FLOAT32);
    a.op = DIST_AVG;
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, a));
    RANK_CHECK(rank, out == in);
    RANK_OK(rank, RunOp(Plugin()->barrier, comm, Args()));
    Plugin()->comm_destroy(comm);
    return 0;
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
}

// Errors that are visible on one rank come back from the issuing call.
TEST(GlooSmoke, IssueTimeErrors) {
  const std::string dir = TempDir("errors");
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    const dist_backend_plugin_t* p = Plugin();
    dist_store_t* store = OpenStore(dir + "/store");
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, rank, 2, CommOptions{}, &comm));
    std::vector<float> f(8, 1.f), g(8, 0.f);
    dist_backend_work_t* work = nullptr;

    dist_op_args_t bitwise = Args();
    bitwise.send = Buffer(f.data(), 8, DIST_FLOAT32);
    bitwise.recv = Buffer(g.data(), 8, DIST_FLOAT32);
    bitwise.op = DIST_BAND;
    dist_error_t* e = p->all_reduce(comm, &bitwise, &work);
    RANK_CHECK(rank, dist_error_code(e) == DIST_INVALID_ARGUMENT);
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "bitwise"));
    dist_error_destroy(e);

    dist_op_args_t cuda = bitwise;
    cuda.op = DIST_SUM;
    cuda.send.device = dist_cuda(0);
    cuda.recv.device = dist_cuda(0);  // (mixed devices fail the common checks first)
    e = p->all_reduce(comm, &cuda, &work);
    RANK_CHECK(rank, dist_error_code(e) == DIST_UNIMPLEMENTED);
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "nccl"));
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "cuda:0"));
    dist_error_destroy(e);

    dist_op_args_t small = bitwise;
    small.op = DIST_SUM;
    small.recv.count = 4;
    e = p->all_reduce(comm, &small, &work);
    RANK_CHECK(rank, dist_error_code(e) == DIST_INVALID_ARGUMENT);
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "recv count is 4 but must be 8"));
    dist_error_destroy(e);

    dist_op_args_t gather = Args();  // root needs n*W elements
    gather.send = Buffer(f.data(), 8, DIST_FLOAT32);
    gather.recv = Buffer(g.data(), 8, DIST_FLOAT32);
    gather.root = rank;
    e = p->gather(comm, &gather, &work);
    RANK_CHECK(rank, dist_error_code(e) == DIST_INVALID_ARGUMENT);
    dist_error_destroy(e);

    dist_op_args_t self = Args();
    self.send = Buffer(f.data(), 8, DIST_FLOAT32);
    self.peer = rank;
    e = p->send(comm, &self, &work);
    RANK_CHECK(rank, dist_error_code(e) == DIST_INVALID_ARGUMENT);
    dist_error_destroy(e);

    // None of these broke the communicator.
    dist_op_args_t ok = bitwise;
    ok.op = DIST_SUM;
    RANK_OK(rank, RunOp(p->all_reduce, comm, ok));
    RANK_CHECK(rank, g[0] == 2.f);
    p->comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

TEST(GlooSmoke, DescribesItself) {
  const dist_backend_plugin_t* p = Plugin();
  EXPECT_STREQ(p->name, "gloo");
  EXPECT_EQ(p->abi_major, static_cast<uint32_t>(DIST_BACKEND_ABI_MAJOR));
  EXPECT_TRUE(absl::StartsWith(p->library_version(), "Gloo 0.5.0"));
  EXPECT_EQ(p->probe(), nullptr);
  dist_backend_capabilities_t caps;
  std::memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  p->get_capabilities(&caps);
  EXPECT_EQ(caps.device_types, 1u << DIST_DEVICE_CPU);
  EXPECT_EQ(caps.dtypes, (1u << DIST_DTYPE_COUNT) - 1);
  EXPECT_EQ(caps.collectives, (1u << DIST_COLLECTIVE_COUNT) - 1);
  EXPECT_EQ(caps.all_reduce_ops, (1u << DIST_REDUCE_OP_COUNT) - 1);
  EXPECT_EQ(caps.flags, DIST_CAP_SUBGROUPS | DIST_CAP_THREAD_MULTIPLE | DIST_CAP_SHRINK);
}

}  // namespace
}  // namespace dist_test

namespace dist_test {
namespace {

// The interface comes from option gloo.ifname (or DIST_GLOO_IFNAME); a
// missing one is a clear error that says which variable to set.
TEST(GlooSmoke, InterfaceFromOption) {
  const std::string dir = TempDir("ifname");
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* store = OpenStore(dir + "/store");
    CommOptions bad;
    bad.options = {{"gloo.ifname", "nosuchif0"}};
    dist_backend_comm_t* comm = nullptr;
    dist_error_t* e = CreateComm(store, rank, 2, bad, &comm);
    RANK_CHECK(rank, comm == nullptr);
    RANK_CHECK(rank, dist_error_code(e) == DIST_UNAVAILABLE);
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "nosuchif0"));
    RANK_CHECK(rank, absl::StrContains(dist_error_message(e), "DIST_GLOO_IFNAME"));
    dist_error_destroy(e);
    dist_store_t* store2 = OpenStore(dir + "/store2");
    CommOptions lo;
    lo.options = {{"gloo.ifname", "lo"}};
    RANK_OK(rank, CreateComm(store2, rank, 2, lo, &comm));
    std::vector<int8_t> in(3, static_cast<int8_t>(rank + 1)), out(3);
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), 3, DIST_INT8);
    a.recv = Buffer(out.data(), 3, DIST_INT8);
    a.op = DIST_BOR;
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, a));
    for (int8_t v : out) RANK_CHECK(rank, v == 3);
    Plugin()->comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

}  // namespace
}  // namespace dist_test

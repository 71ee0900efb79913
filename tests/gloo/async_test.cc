// Asynchronous behaviour: many outstanding operations completing in issue
// order, handles destroyed before completion, waits that time out and are
// retried, and subgroups (comm_split) with a non-member.
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/gloo/gloo_suite.h"

namespace dist_test {
namespace {

TEST(GlooAsync, ManyOutstandingOperationsCompleteInOrder) {
  const std::string dir = TempDir("outstanding");
  constexpr int kOps = 200;
  constexpr int kCount = 4096;
  auto results = RunRanks(2, absl::Seconds(90), [&](int rank) {
    const dist_backend_plugin_t* p = Plugin();
    dist_store_t* store = OpenStore(dir + "/store");
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, rank, 2, CommOptions{}, &comm));
    std::vector<std::vector<int32_t>> in(kOps), out(kOps);
    std::vector<dist_backend_work_t*> works(kOps, nullptr);
    for (int k = 0; k < kOps; ++k) {
      in[k].assign(kCount, rank * 7 + k);
      out[k].assign(kCount, -1);
      dist_op_args_t a = Args();
      a.send = Buffer(in[k].data(), kCount, DIST_INT32);
      a.recv = Buffer(out[k].data(), kCount, DIST_INT32);
      a.op = DIST_SUM;
      a.root = k % 2;
      // Mix in broadcasts so that different kinds interleave.
      RANK_OK(rank, (k % 3 == 2 ? p->broadcast : p->all_reduce)(comm, &a, &works[k]));
    }
    // Poll: whenever operation k is done, every earlier one must be too.
    int done_prefix = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (done_prefix < kOps && absl::Now() < deadline) {
      absl::SleepFor(absl::Microseconds(200));  // leave the cores to the workers
      for (int k = kOps - 1; k >= done_prefix; --k) {
        int done = 0;
        RANK_OK(rank, p->work_test(works[k], &done));
        if (done) {
          for (int j = done_prefix; j < k; ++j) {
            int earlier = 0;
            RANK_OK(rank, p->work_test(works[j], &earlier));
            RANK_CHECK(rank, earlier == 1);
          }
          done_prefix = k + 1;
          break;
        }
      }
    }
    RANK_CHECK(rank, done_prefix == kOps);
    for (int k = 0; k < kOps; ++k) {
      RANK_OK(rank, p->work_wait(works[k], 1000));
      p->work_destroy(works[k]);
      const int32_t expected = k % 3 == 2 ? (k % 2) * 7 + k : 7 + 2 * k;
      for (int i = 0; i < kCount; i += 97) RANK_CHECK(rank, out[k][i] == expected);
    }
    p->comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

TEST(GlooAsync, HandleDestroyedBeforeCompletionAndRetriedWait) {
  const std::string dir = TempDir("handles");
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    const dist_backend_plugin_t* p = Plugin();
    dist_store_t* store = OpenStore(dir + "/store");
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, rank, 2, CommOptions{}, &comm));
    if (rank == 1) absl::SleepFor(absl::Milliseconds(700));  // joins late
    std::vector<double> a_in(1000, 1.0 + rank), a_out(1000), b_in(10, 2.0), b_out(10);
    dist_op_args_t a = Args();
    a.send = Buffer(a_in.data(), 1000, DIST_FLOAT64);
    a.recv = Buffer(a_out.data(), 1000, DIST_FLOAT64);
    a.op = DIST_MAX;
    dist_op_args_t b = Args();
    b.send = Buffer(b_in.data(), 10, DIST_FLOAT64);
    b.recv = Buffer(b_out.data(), 10, DIST_FLOAT64);
    b.op = DIST_SUM;
    dist_backend_work_t* first = nullptr;
    dist_backend_work_t* second = nullptr;
    RANK_OK(rank, p->all_reduce(comm, &a, &first));
    p->work_destroy(first);  // the operation still runs to its end
    RANK_OK(rank, p->all_reduce(comm, &b, &second));
    if (rank == 0) {  // rank 1 is late: a short wait times out, the work stays pending
      dist_error_t* e = p->work_wait(second, 100);
      RANK_CHECK(rank, dist_error_code(e) == DIST_DEADLINE_EXCEEDED);
      dist_error_destroy(e);
      int done = 1;
      RANK_OK(rank, p->work_test(second, &done));
      RANK_CHECK(rank, done == 0);
    }
    RANK_OK(rank, p->work_wait(second, 20000));
    p->work_destroy(second);
    for (double v : b_out) RANK_CHECK(rank, v == 4.0);
    for (double v : a_out) RANK_CHECK(rank, v == 2.0);  // completed before `second`
    p->comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

TEST(GlooAsync, SubgroupWithNonMember) {
  const std::string dir = TempDir("split");
  auto results = RunRanks(3, absl::Seconds(60), [&](int rank) {
    const dist_backend_plugin_t* p = Plugin();
    dist_store_t* store = OpenStore(dir + "/store");
    dist_store_t* sub_store = OpenStore(dir + "/sub");  // the fresh namespace the core would give
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(store, rank, 3, CommOptions{}, &comm));
    const int32_t members[] = {0, 2};
    const int sub_rank = rank == 0 ? 0 : rank == 2 ? 1 : -1;
    std::vector<dist_kv_t> kvs;
    CommOptions options;
    options.group = "sub";
    dist_comm_config_t config = Config(sub_store, sub_rank, sub_rank < 0 ? -1 : 2, options, &kvs);
    dist_backend_comm_t* sub = reinterpret_cast<dist_backend_comm_t*>(0x1);
    RANK_OK(rank, p->comm_split(comm, members, 2, &config, &sub));
    if (rank == 1) {
      RANK_CHECK(rank, sub == nullptr);
    } else {
      RANK_CHECK(rank, sub != nullptr);
      std::vector<int64_t> in(50, rank + 1), out(50);
      dist_op_args_t a = Args();
      a.send = Buffer(in.data(), 50, DIST_INT64);
      a.recv = Buffer(out.data(), 50, DIST_INT64);
      a.op = DIST_SUM;
      RANK_OK(rank, RunOp(p->all_reduce, sub, a));
      for (int64_t v : out) RANK_CHECK(rank, v == 1 + 3);  // ranks 0 and 2 only
      // Subgroup point-to-point uses subgroup ranks.
      int32_t token = rank == 0 ? 42 : 0;
      dist_op_args_t t = Args();
      t.peer = 1 - sub_rank;
      t.tag = 3;
      if (sub_rank == 0) {
        t.send = Buffer(&token, 1, DIST_INT32);
        RANK_OK(rank, RunOp(p->send, sub, t));
      } else {
        t.recv = Buffer(&token, 1, DIST_INT32);
        RANK_OK(rank, RunOp(p->recv, sub, t));
        RANK_CHECK(rank, token == 42);
      }
      p->comm_destroy(sub);
    }
    // The parent still works for everyone.
    std::vector<int32_t> in(8, 1), out(8);
    dist_op_args_t a = Args();
    a.send = Buffer(in.data(), 8, DIST_INT32);
    a.recv = Buffer(out.data(), 8, DIST_INT32);
    a.op = DIST_SUM;
    RANK_OK(rank, RunOp(p->all_reduce, comm, a));
    for (int32_t v : out) RANK_CHECK(rank, v == 3);
    p->comm_destroy(comm);
    return 0;
  });
  for (const RankResult& r : results) EXPECT_TRUE(r.ok()) << r.Describe();
}

}  // namespace
}  // namespace dist_test

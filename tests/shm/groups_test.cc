// Subgroups (comm_split) and two jobs running side by side on one host.
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_suite.h"

namespace dist_test {
namespace {

dist_op_args_t SumInPlace(int64_t* data, uint64_t n) {
  dist_op_args_t a = Args();
  a.send = dist_make_buffer(data, n, DIST_INT64, dist_cpu());
  a.recv = a.send;
  a.op = DIST_SUM;
  return a;
}

TEST(ShmGroups, SplitGivesMembersACommunicatorAndNonMembersNull) {
  const std::string store = TempDir("split") + "/store";
  constexpr int kWorld = 4;
  auto results = RunRanks(kWorld, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, kWorld);
    dist_backend_comm_t* parent = nullptr;
    RANK_OK(rank, CreateComm(s, rank, kWorld, CommOptions(), &parent));
    const int32_t members[] = {1, 3};
    dist_store_t* sub_store = PrefixStore(s, "group1/");
    dist_comm_config_t config;
    std::memset(&config, 0, sizeof(config));
    config.struct_size = sizeof(config);
    config.rank = rank == 1 ? 0 : rank == 3 ? 1 : -1;
    config.world_size = 2;
    config.local_rank = config.rank;
    config.local_world_size = 2;
    config.store = sub_store;
    config.timeout_ms = 20000;
    config.group_name = "group1";
    config.device_index = -1;
    dist_backend_comm_t* sub = nullptr;
    RANK_OK(rank, Plugin()->comm_split(parent, members, 2, &config, &sub));
    std::vector<int64_t> data(5000);
    if (config.rank < 0) {
      RANK_CHECK(rank, sub == nullptr);
    } else {
      RANK_CHECK(rank, sub != nullptr);
      for (size_t i = 0; i < data.size(); ++i) data[i] = rank * 1000 + i;
      RANK_OK(rank, RunOp(Plugin()->all_reduce, sub, SumInPlace(data.data(), data.size())));
      for (size_t i = 0; i < data.size(); ++i) RANK_CHECK(rank, data[i] == 4000 + 2 * int64_t(i));
      // Subgroup ranks are the new ones: send/recv between 0 and 1.
      int64_t token = rank;
      dist_op_args_t p2p = Args();
      if (config.rank == 0) {
        p2p.send = dist_make_buffer(&token, 1, DIST_INT64, dist_cpu());
        p2p.peer = 1;
        RANK_OK(rank, RunOp(Plugin()->send, sub, p2p));
      } else {
        p2p.recv = dist_make_buffer(&token, 1, DIST_INT64, dist_cpu());
        p2p.peer = 0;
        RANK_OK(rank, RunOp(Plugin()->recv, sub, p2p));
        RANK_CHECK(rank, token == 1);
      }
    }
    // The parent keeps working alongside.
    for (size_t i = 0; i < data.size(); ++i) data[i] = rank;
    RANK_OK(rank, RunOp(Plugin()->all_reduce, parent, SumInPlace(data.data(), data.size())));
    for (size_t i = 0; i < data.size(); ++i) RANK_CHECK(rank, data[i] == 6);
    Plugin()->comm_destroy(sub);
    Plugin()->comm_destroy(parent);
    sub_store->release(sub_store->ctx);
    return 0;
  });
  for (int r = 0; r < kWorld; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].Describe();
}

TEST(ShmGroups, TwoConcurrentJobsDoNotInterfere) {
  // Ranks 0-1 are job A, ranks 2-3 job B, each with its own store; both run
  // many all_reduces at once with job-specific values.
  const std::string dir = TempDir("two-jobs");
  std::vector<pid_t> leaders;
  auto results = RunRanks(
      4, absl::Seconds(60),
      [&](int process) {
        const int job = process / 2;
        const int rank = process % 2;
        dist_store_t* s = OpenStore(absl::StrCat(dir, "/store-", job), rank, 2);
        dist_backend_comm_t* comm = nullptr;
        RANK_OK(process, CreateComm(s, rank, 2, CommOptions(), &comm));
        for (int round = 0; round < 200; ++round) {
          const size_t n = 1 + (round * 997) % 40000;
          std::vector<int64_t> data(n);
          for (size_t i = 0; i < n; ++i) data[i] = (job + 1) * 1000000 + rank * 1000 + round + i;
          RANK_OK(process, RunOp(Plugin()->all_reduce, comm, SumInPlace(data.data(), n)));
          for (size_t i = 0; i < n; ++i) {
            RANK_CHECK(process, data[i] == 2 * ((job + 1) * 1000000 + round + int64_t(i)) + 1000);
          }
        }
        Plugin()->comm_destroy(comm);
        return 0;
      },
      [&](const std::vector<pid_t>& pids) {
        leaders = {pids[0], pids[2]};
      });
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(results[r].ok()) << "process " << r << ": " << results[r].Describe();
  for (pid_t leader : leaders) EXPECT_TRUE(SegmentsOf(leader).empty());
}

TEST(ShmGroups, SeveralCommunicatorsOnOneStoreNamespace) {
  // Two alive at once, then a third after destroying them, all created on
  // the same store without prefixes: none may pick up another's keys.
  const std::string store = TempDir("reuse") + "/store";
  auto results = RunRanks(3, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 3);
    dist_backend_comm_t* comms[3] = {};
    RANK_OK(rank, CreateComm(s, rank, 3, CommOptions(), &comms[0]));
    RANK_OK(rank, CreateComm(s, rank, 3, CommOptions(), &comms[1]));
    int64_t a[2] = {rank, 10 * rank};
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comms[1], SumInPlace(a, 2)));
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comms[0], SumInPlace(a, 2)));
    RANK_CHECK(rank, a[0] == 9 && a[1] == 90);
    Plugin()->comm_destroy(comms[0]);
    Plugin()->comm_destroy(comms[1]);
    RANK_OK(rank, CreateComm(s, rank, 3, CommOptions(), &comms[2]));
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comms[2], SumInPlace(a, 2)));
    RANK_CHECK(rank, a[0] == 27 && a[1] == 270);
    Plugin()->comm_destroy(comms[2]);
    return 0;
  });
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].Describe();
}

}  // namespace
}  // namespace dist_test

// dist_all_to_all_v and dist_all_gather_v through the real core on gloo
// take the plugin's run_v, not the core's construction from sendrecv: ranks
// that disagree on all_to_all_v's counts get the plugin's INVALID_ARGUMENT
// at once, which only gloo's run_v gives (the core's construction would
// time out). Results are compared with blocks computed here.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dist/dist.h"
#include "gtest/gtest.h"
#include "tests/gloo/rank_checks.h"

namespace {

constexpr int kWorld = 3;

int32_t Value(int from, int to, uint64_t k) {
  return 100000 * (from + 1) + 1000 * to + static_cast<int32_t>(k);
}

// all_to_all_v where rank i sends rank j count(i, j) elements, packed.
template <typename CountFn>
dist_error_t* AllToAllV(dist_process_group_t* group, int rank, CountFn count,
                        std::vector<int32_t>* recv, std::vector<int32_t>* want) {
  std::vector<uint64_t> send_counts, recv_counts;
  for (int j = 0; j < kWorld; ++j) send_counts.push_back(count(rank, j));
  for (int i = 0; i < kWorld; ++i) recv_counts.push_back(count(i, rank));
  std::vector<int32_t> send;
  for (int j = 0; j < kWorld; ++j) {
    for (uint64_t k = 0; k < send_counts[j]; ++k) send.push_back(Value(rank, j, k));
  }
  want->clear();
  for (int i = 0; i < kWorld; ++i) {
    for (uint64_t k = 0; k < recv_counts[i]; ++k) want->push_back(Value(i, rank, k));
  }
  recv->assign(want->size(), -1);
  const dist_buffer_t s = dist_make_buffer(send.data(), send.size(), DIST_INT32, dist_cpu());
  const dist_buffer_t r = dist_make_buffer(recv->data(), recv->size(), DIST_INT32, dist_cpu());
  return dist_all_to_all_v(group, &s, send_counts.data(), nullptr, &r, recv_counts.data(), nullptr,
                           nullptr);
}

int Rank(int rank, const std::string& store) {
  dist_init_options_t options = dist_init_options_default();
  options.backend = "gloo";
  const std::string url = absl::StrCat("file://", store, "?rank=", rank, "&world_size=", kWorld);
  options.init_method = url.c_str();
  options.timeout_ms = 20000;
  dist_process_group_t* group = nullptr;
  OK_RANK(dist_init(&options, &group));

  std::vector<int32_t> recv, want;
  OK_RANK(AllToAllV(
      group, rank, [](int i, int j) { return static_cast<uint64_t>((i + 2 * j) % 3); }, &recv,
      &want));
  CHECK_RANK(recv == want);

  {  // all_gather_v, rank 1 giving nothing, blocks displaced by one element.
    const std::vector<uint64_t> counts = {3, 0, 2}, displs = {1, 4, 5};
    std::vector<int32_t> mine, all(7, -1),
        expected = {-1, Value(0, 0, 0), Value(0, 0, 1), Value(0, 0, 2),
                    -1, Value(2, 0, 0), Value(2, 0, 1)};
    for (uint64_t k = 0; k < counts[rank]; ++k) mine.push_back(Value(rank, 0, k));
    const dist_buffer_t s = dist_make_buffer(mine.data(), mine.size(), DIST_INT32, dist_cpu());
    const dist_buffer_t r = dist_make_buffer(all.data(), all.size(), DIST_INT32, dist_cpu());
    OK_RANK(dist_all_gather_v(group, &s, &r, counts.data(), displs.data(), nullptr));
    CHECK_RANK(all == expected);
  }

  // Rank 0 sends rank 1 four elements, rank 1 expects two.
  dist_error_t* e = AllToAllV(
      group, rank,
      [rank](int i, int j) -> uint64_t {
        if (i == 0 && j == 1) return rank == 1 ? 2 : 4;
        return static_cast<uint64_t>((i + 2 * j) % 3);
      },
      &recv, &want);
  if (rank == 2) {
    CHECK_RANK(e == nullptr);
    CHECK_RANK(recv == want);
  } else {
    CHECK_RANK(dist_error_code(e) == DIST_INVALID_ARGUMENT);
    std::fprintf(stderr, "rank %d: %s\n", rank, dist_error_message(e));
    CHECK_RANK(absl::StrContains(dist_error_message(e), "gloo backend: all_to_all_v"));
    dist_error_destroy(e);
  }
  dist_destroy(group);
  return 0;
}

TEST(GlooVariableCountsThroughTheCore, TakesThePluginsRunV) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string store = absl::StrCat(tmp ? tmp : "/tmp", "/v-", getpid(), ".store");
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) std::_Exit(Rank(rank, store));
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

}  // namespace

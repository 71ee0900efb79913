// The Gloo backend through the real core (libdist.so loads the bundled
// plugin) with the real file:// rendezvous: init, a blocking and an
// asynchronous all_reduce, and a subgroup with a non-member.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/dist.h"
#include "gtest/gtest.h"
#include "tests/gloo/rank_checks.h"

namespace {

int Rank(int rank, int world, const std::string& store) {
  dist_init_options_t options = dist_init_options_default();
  options.backend = "gloo";
  const std::string url = absl::StrCat("file://", store, "?rank=", rank, "&world_size=", world);
  options.init_method = url.c_str();
  options.timeout_ms = 20000;
  dist_process_group_t* group = nullptr;
  OK_RANK(dist_init(&options, &group));
  CHECK_RANK(std::string(dist_backend_name(group, DIST_DEVICE_CPU)) == "gloo");
  CHECK_RANK(dist_rank(group) == rank);

  // Blocking all_reduce: int32 sum.
  std::vector<int32_t> in(1000), out(1000);
  for (int i = 0; i < 1000; ++i) in[i] = rank * 1000 + i;
  dist_buffer_t send = dist_make_buffer(in.data(), in.size(), DIST_INT32, dist_cpu());
  dist_buffer_t recv = dist_make_buffer(out.data(), out.size(), DIST_INT32, dist_cpu());
  OK_RANK(dist_all_reduce(group, &send, &recv, DIST_SUM, nullptr));
  for (int i = 0; i < 1000; ++i) CHECK_RANK(out[i] == 3000 + 3 * i);

  // Asynchronous: float64 max, then wait.
  std::vector<double> d(10, rank * 1.5), dmax(10);
  dist_buffer_t dsend = dist_make_buffer(d.data(), 10, DIST_FLOAT64, dist_cpu());
  dist_buffer_t drecv = dist_make_buffer(dmax.data(), 10, DIST_FLOAT64, dist_cpu());
  dist_work_t* work = nullptr;
  OK_RANK(dist_all_reduce(group, &dsend, &drecv, DIST_MAX, &work));
  OK_RANK(dist_work_wait(work, -1));
  dist_work_destroy(work);
  for (double v : dmax) CHECK_RANK(v == 3.0);

  // Subgroup {2, 0}; rank 1 is outside and gets a clear error.
  const int32_t members[] = {2, 0};
  dist_process_group_t* sub = nullptr;
  OK_RANK(dist_new_group(group, members, 2, &sub));
  std::vector<int64_t> s(5, rank + 1), sum(5, 0);
  dist_buffer_t ssend = dist_make_buffer(s.data(), 5, DIST_INT64, dist_cpu());
  dist_buffer_t srecv = dist_make_buffer(sum.data(), 5, DIST_INT64, dist_cpu());
  dist_error_t* e = dist_all_reduce(sub, &ssend, &srecv, DIST_SUM, nullptr);
  if (rank == 1) {
    CHECK_RANK(dist_rank(sub) == -1);
    CHECK_RANK(dist_error_code(e) == DIST_FAILED_PRECONDITION);
    std::fprintf(stderr, "non-member: %s\n", dist_error_message(e));
    dist_error_destroy(e);
  } else {
    CHECK_RANK(e == nullptr);
    for (int64_t v : sum) CHECK_RANK(v == 1 + 3);
  }
  dist_destroy(sub);
  dist_destroy(group);
  return 0;
}

TEST(GlooThroughTheCore, InitAllReduceAndSubgroup) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string store = absl::StrCat(tmp ? tmp : "/tmp", "/core-", getpid(), ".store");
  constexpr int kWorld = 3;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < kWorld; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) std::_Exit(Rank(rank, kWorld, store));
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
}

}  // namespace

// dist_grow and joining processes (DIST_JOIN=1) with real processes, the
// real core and real gloo and shm plugins: survivors shrink, then admit
// replacements started after the failure, and every rank of the grown group
// checks its collectives against values computed from the ranks.
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/dist.h"
#include "gtest/gtest.h"
#include "tests/survival/scenario.h"

namespace dist_survival {
namespace {

void ExpectGrowsBack(Scenario s, const std::string& name) {
  s.grow = true;
  s.dir = TempDir(name);
  ASSERT_FALSE(s.dir.empty());
  const Outcome outcome = Run(s);
  for (size_t slot = 0; slot < outcome.rank_errors.size(); ++slot) {
    EXPECT_EQ(outcome.rank_errors[slot], "")
        << name << (static_cast<int>(slot) < s.world ? " rank " : " joiner ") << slot;
  }
  // Reported, not asserted (speed lives in shrink_bench).
  std::printf("%s: failure -> first collective of the shrunk group %s, of the grown group %s\n",
              name.c_str(), absl::FormatDuration(outcome.failure_to_first_collective).c_str(),
              absl::FormatDuration(outcome.failure_to_grown_collective).c_str());
}

TEST(Grow, GlooGrowsBackAfterASigkill) {
  ExpectGrowsBack(MakeScenario("gloo", 4, 2, Failure::kKill), "gloo_grow");
}

TEST(Grow, ShmGrowsBackAfterRankZeroDies) {
  ExpectGrowsBack(MakeScenario("shm", 3, 0, Failure::kKill), "shm_grow_rank0");
}

TEST(Grow, GlooGrowsBackAfterTwoRanksDie) {
  Scenario s = MakeScenario("gloo", 4, 1, Failure::kKill);
  s.second_victim = 3;
  ExpectGrowsBack(s, "gloo_grow_two");
}

// One process: a group of one over file://, and the errors around it.
struct Alone {
  explicit Alone(const std::string& name) : dir(TempDir(name)) {}
  std::string Url(bool joiner) const {
    return absl::StrCat("file://", dir, "/store", joiner ? "" : "?rank=0&world_size=1");
  }
  dist_error_t* Init(bool joiner, int64_t timeout_ms, dist_process_group_t** group) const {
    const std::string url = Url(joiner);
    dist_init_options_t options = dist_init_options_default();
    options.backend = "gloo";
    options.init_method = url.c_str();
    options.timeout_ms = timeout_ms;
    const dist_kv_t join[] = {{"dist.join", "1"}};
    if (joiner) {
      options.options = join;
      options.num_options = 1;
    }
    return dist_init(&options, group);
  }
  std::string dir;
};

std::string TakeMessage(dist_error_t* e, dist_error_code_t* code) {
  *code = dist_error_code(e);
  std::string text = dist_error_message(e);
  dist_error_destroy(e);
  return text;
}

TEST(Grow, AGrowThatNobodyJoinsSaysHowToStartJoiners) {
  setenv("DIST_SURVIVAL", "1", 1);
  Alone alone("nobody_joins");
  dist_process_group_t* group = nullptr;
  ASSERT_EQ(alone.Init(false, 10000, &group), nullptr);
  dist_grow_options_t options{sizeof(dist_grow_options_t), 300, 1};
  dist_process_group_t* grown = nullptr;
  dist_error_t* e = dist_grow(group, &options, &grown);
  ASSERT_NE(e, nullptr);
  dist_error_code_t code;
  const std::string text = TakeMessage(e, &code);
  EXPECT_EQ(code, DIST_DEADLINE_EXCEEDED) << text;
  EXPECT_NE(text.find("only 0 of 1 joining processes asked to join"), std::string::npos) << text;
  EXPECT_NE(text.find("DIST_JOIN=1"), std::string::npos) << text;
  EXPECT_EQ(grown, nullptr);
  // The group is unharmed: it still runs collectives.
  float x = 3;
  dist_buffer_t b = dist_make_buffer(&x, 1, DIST_FLOAT32, dist_cpu());
  ASSERT_EQ(dist_all_reduce(group, &b, &b, DIST_SUM, nullptr), nullptr);
  EXPECT_EQ(x, 3.f);
  // Bad options are refused before anything waits.
  options.joiners = -1;
  e = dist_grow(group, &options, &grown);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(TakeMessage(e, &code).find("joiners -1 is negative"), std::string::npos);
  EXPECT_EQ(code, DIST_INVALID_ARGUMENT);
  dist_destroy(group);
  unsetenv("DIST_SURVIVAL");
}

TEST(Grow, AJoinerNobodyAdmitsGivesItsTicketBackAndSaysWhy) {
  setenv("DIST_SURVIVAL", "1", 1);
  Alone alone("nobody_admits");
  dist_process_group_t* group = nullptr;
  ASSERT_EQ(alone.Init(false, 10000, &group), nullptr);
  dist_process_group_t* joined = nullptr;
  dist_error_t* e = alone.Init(true, 300, &joined);
  ASSERT_NE(e, nullptr);
  dist_error_code_t code;
  std::string text = TakeMessage(e, &code);
  EXPECT_EQ(code, DIST_DEADLINE_EXCEEDED) << text;
  EXPECT_NE(text.find("no rank of group 'default' admitted this process (ticket 1)"),
            std::string::npos)
      << text;
  // Its ticket was withdrawn: a later grow does not wait for it, and
  // admits the next joiner... of which there is none, so it times out
  // saying none asked (not stuck on ticket 1).
  dist_grow_options_t options{sizeof(dist_grow_options_t), 300, 0};
  dist_process_group_t* grown = nullptr;
  e = dist_grow(group, &options, &grown);
  ASSERT_NE(e, nullptr);
  text = TakeMessage(e, &code);
  EXPECT_NE(text.find("no joining processes asked to join"), std::string::npos) << text;
  dist_destroy(group);
  unsetenv("DIST_SURVIVAL");
}

TEST(Grow, JoiningWithoutSurvivalSaysWhatToTurnOn) {
  unsetenv("DIST_SURVIVAL");
  Alone alone("join_no_survival");
  dist_process_group_t* joined = nullptr;
  dist_error_t* e = alone.Init(true, 1000, &joined);
  ASSERT_NE(e, nullptr);
  dist_error_code_t code;
  const std::string text = TakeMessage(e, &code);
  EXPECT_EQ(code, DIST_FAILED_PRECONDITION) << text;
  EXPECT_NE(text.find("a joining process needs survival on"), std::string::npos) << text;
}

TEST(Grow, GrowWithoutSurvivalSaysHowToTurnItOn) {
  unsetenv("DIST_SURVIVAL");
  Alone alone("grow_no_survival");
  dist_process_group_t* group = nullptr;
  ASSERT_EQ(alone.Init(false, 10000, &group), nullptr);
  dist_process_group_t* grown = nullptr;
  dist_error_t* e = dist_grow(group, nullptr, &grown);
  ASSERT_NE(e, nullptr);
  dist_error_code_t code;
  const std::string text = TakeMessage(e, &code);
  EXPECT_EQ(code, DIST_FAILED_PRECONDITION) << text;
  EXPECT_NE(text.find("dist_grow on group 'default': survival is off"), std::string::npos) << text;
  dist_destroy(group);
}

// A process restarted with a live rank's RANK (not as a joiner) is refused
// with an error naming both processes, and the job's ranks go on.
TEST(Grow, AProcessPretendingToBeALiveRankIsRefusedAndTheJobGoesOn) {
  const std::string dir = TempDir("impostor");
  ASSERT_FALSE(dir.empty());
  struct Shared {
    int ready;          // ranks that finished their first all_reduce
    int impostor_done;  // the impostor's dist_init has answered
    char impostor[512];
    char errors[2][256];
  };
  void* memory =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  auto* shared = new (memory) Shared{};
  auto init = [&](int rank, int64_t timeout_ms, dist_process_group_t** group) {
    setenv("DIST_SURVIVAL", "1", 1);
    const std::string url = absl::StrCat("file://", dir, "/store?rank=", rank, "&world_size=2");
    dist_init_options_t options = dist_init_options_default();
    options.backend = "gloo";
    options.init_method = url.c_str();
    options.timeout_ms = timeout_ms;
    return dist_init(&options, group);
  };
  auto all_reduce_ok = [](dist_process_group_t* group) {
    float x = static_cast<float>(dist_rank(group) + 1);
    dist_buffer_t b = dist_make_buffer(&x, 1, DIST_FLOAT32, dist_cpu());
    dist_error_t* e = dist_all_reduce(group, &b, &b, DIST_SUM, nullptr);
    const bool ok = e == nullptr && x == 3.f;
    dist_error_destroy(e);
    return ok;
  };
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      dist_process_group_t* group = nullptr;
      const char* failed = nullptr;
      if (dist_error_t* e = init(rank, 20000, &group)) {
        std::snprintf(shared->errors[rank], sizeof(shared->errors[rank]), "init: %s",
                      dist_error_message(e));
        _exit(1);
      }
      if (!all_reduce_ok(group)) failed = "the first all_reduce";
      __atomic_add_fetch(&shared->ready, 1, __ATOMIC_ACQ_REL);
      const absl::Time until = absl::Now() + absl::Seconds(30);
      while (__atomic_load_n(&shared->impostor_done, __ATOMIC_ACQUIRE) == 0 &&
             absl::Now() < until) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      if (failed == nullptr && !all_reduce_ok(group)) failed = "the all_reduce after the impostor";
      if (failed != nullptr) {
        std::snprintf(shared->errors[rank], sizeof(shared->errors[rank]), "%s failed", failed);
      }
      dist_destroy(group);
      _exit(failed == nullptr ? 0 : 1);
    }
    ranks.push_back(pid);
  }
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (__atomic_load_n(&shared->ready, __ATOMIC_ACQUIRE) < 2 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const pid_t impostor = fork();
  if (impostor == 0) {
    dist_process_group_t* group = nullptr;
    dist_error_t* e = init(1, 3000, &group);
    std::snprintf(shared->impostor, sizeof(shared->impostor), "%s: %s",
                  e != nullptr ? dist_error_code_name(dist_error_code(e)) : "OK",
                  e != nullptr ? dist_error_message(e) : "");
    _exit(0);
  }
  int status = 0;
  waitpid(impostor, &status, 0);
  __atomic_store_n(&shared->impostor_done, 1, __ATOMIC_RELEASE);
  for (int rank = 0; rank < 2; ++rank) {
    waitpid(ranks[rank], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << ": " << shared->errors[rank];
  }
  const std::string impostor_said = shared->impostor;
  EXPECT_NE(impostor_said.find("ALREADY_EXISTS"), std::string::npos) << impostor_said;
  EXPECT_NE(impostor_said.find("rank 1 claimed by two processes"), std::string::npos)
      << impostor_said;
  munmap(memory, sizeof(Shared));
}

}  // namespace
}  // namespace dist_survival

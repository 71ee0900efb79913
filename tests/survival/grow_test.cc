// dist_grow and joining processes (DIST_JOIN=1) with real processes, the
// real core and real gloo and shm plugins: survivors shrink, then admit
// replacements started after the failure, and every rank of the grown group
// checks its collectives against values computed from the ranks.
#include <stdlib.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/dist.h"
#include "gtest/gtest.h"
#include "tests/survival/scenario.h"

namespace dist_survival {
namespace {

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(root != nullptr ? root : "/tmp", "/", name);
  std::string command = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
  if (std::system(command.c_str()) != 0) return "";
  return dir;
}

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

}  // namespace
}  // namespace dist_survival

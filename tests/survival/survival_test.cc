// Surviving a dead rank with real processes, the real core and real
// plugins (gloo over loopback TCP, shm), meeting over file://: the victim
// is SIGKILLed (its sockets close), SIGSTOPped (silent, sockets open: only
// the failure detector can tell) or revokes the group itself; the others
// get DIST_REVOKED (or, for a kill, the peer's failure), shrink, and check
// the new group's collectives against values computed independently.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "dist/dist.h"
#include "gtest/gtest.h"
#include "support/free_port.h"
#include "tests/survival/scenario.h"

namespace dist_survival {
namespace {

void ExpectSurvives(Scenario s, const std::string& name) {
  s.dir = TempDir(name);
  ASSERT_FALSE(s.dir.empty());
  const Outcome outcome = Run(s);
  for (int rank = 0; rank < s.world; ++rank) {
    EXPECT_EQ(outcome.rank_errors[rank], "") << name << " rank " << rank;
  }
  // Reported, not asserted (speed lives in shrink_bench).
  std::printf("%s: failure -> first error %s, -> first collective of the shrunk group %s\n",
              name.c_str(), absl::FormatDuration(outcome.failure_to_error).c_str(),
              outcome.failure_to_first_collective > absl::ZeroDuration()
                  ? absl::FormatDuration(outcome.failure_to_first_collective).c_str()
                  : "(none)");
}

// Over tcp://, rank 0 hosting the store. The stopped-rank cases use it: a
// rank stopped while it holds file://'s lock would stall every rank's store
// calls until the store's timeout (docs/survival.md).
void ExpectSurvivesOverTcp(Scenario s, const std::string& name) {
  const absl::StatusOr<int> port = dist::PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  s.tcp_port = *port;
  ExpectSurvives(s, name);
}

TEST(Survival, GlooShrinksAfterASigkill) {
  ExpectSurvives(MakeScenario("gloo", 4, 2, Failure::kKill), "gloo_kill");
}

TEST(Survival, GlooShrinksAfterASigstop) {
  ExpectSurvivesOverTcp(MakeScenario("gloo", 4, 1, Failure::kStop), "gloo_stop");
}

TEST(Survival, GlooRevokeReachesEveryRankAndShrinkKeepsThemAll) {
  ExpectSurvives(MakeScenario("gloo", 3, 1, Failure::kRevoke), "gloo_revoke");
}

// A work handle's wait reads the revoke record before it reports, as a
// blocking call does: the revoker's closed connections are the revoke.
TEST(Survival, GlooRevokeReachesEveryRankThroughWorkHandles) {
  Scenario s = MakeScenario("gloo", 4, 1, Failure::kRevoke);
  s.asynchronous = true;
  ExpectSurvives(s, "gloo_revoke_async");
}

TEST(Survival, GlooWorkHandlesSeeASigkill) {
  Scenario s = MakeScenario("gloo", 4, 2, Failure::kKill);
  s.asynchronous = true;
  ExpectSurvives(s, "gloo_kill_async");
}

TEST(Survival, ShmShrinksAfterASigkill) {
  ExpectSurvives(MakeScenario("shm", 4, 3, Failure::kKill), "shm_kill");
}

TEST(Survival, ShmShrinksAfterASigstop) {
  ExpectSurvivesOverTcp(MakeScenario("shm", 3, 2, Failure::kStop), "shm_stop");
}

TEST(Survival, GlooRankZeroCanDieWhenNoRankHostsTheStore) {
  ExpectSurvives(MakeScenario("gloo", 3, 0, Failure::kKill), "gloo_kill_rank0");
}

TEST(Survival, GlooOverTcpShrinksWhenRankZeroHostingTheStoreLives) {
  ExpectSurvivesOverTcp(MakeScenario("gloo", 3, 2, Failure::kKill), "gloo_tcp_kill");
}

TEST(Survival, ShrinkSaysTheStoreDiedWithRankZero) {
  ExpectSurvivesOverTcp(MakeScenario("gloo", 3, 0, Failure::kKill), "gloo_tcp_kill_store");
}

TEST(Survival, GlooShrinksWhenTwoRanksDieAtOnce) {
  Scenario s = MakeScenario("gloo", 5, 1, Failure::kKill);
  s.second_victim = 3;
  ExpectSurvives(s, "gloo_kill_two");
}

TEST(Survival, ARankDyingDuringTheShrinkIsLeftOutToo) {
  Scenario s = MakeScenario("gloo", 4, 1, Failure::kKill);
  s.second_victim = 2;
  s.second_dies_during_shrink = true;
  ExpectSurvives(s, "gloo_kill_during_shrink");
}

TEST(Survival, ARankResumedAfterTheShrinkIsToldItWasLeftOut) {
  Scenario s = MakeScenario("shm", 3, 1, Failure::kStop);
  s.resume_victim = true;
  ExpectSurvivesOverTcp(s, "shm_stop_resume");
}

// One rank, in this process: the settings' errors and shrink without
// survival on.
dist_error_t* InitAlone(const std::string& name, dist_process_group_t** group) {
  const std::string url = absl::StrCat("file://", TempDir(name), "/store?rank=0&world_size=1");
  dist_init_options_t options = dist_init_options_default();
  options.backend = "gloo";
  options.init_method = url.c_str();
  return dist_init(&options, group);
}

TEST(Survival, ShrinkWithoutSurvivalOnSaysHowToTurnItOn) {
  unsetenv("DIST_SURVIVAL");
  dist_process_group_t* group = nullptr;
  ASSERT_EQ(InitAlone("off", &group), nullptr);
  dist_process_group_t* shrunk = nullptr;
  dist_error_t* e = dist_shrink(group, nullptr, &shrunk);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(dist_error_code(e), DIST_FAILED_PRECONDITION);
  EXPECT_NE(std::string(dist_error_message(e)).find("DIST_SURVIVAL=1"), std::string::npos)
      << dist_error_message(e);
  dist_error_destroy(e);
  EXPECT_EQ(shrunk, nullptr);
  // Revoke still works on this rank alone, and says survival is off.
  ASSERT_EQ(dist_revoke(group, "done here"), nullptr);
  float x = 1;
  dist_buffer_t b = dist_make_buffer(&x, 1, DIST_FLOAT32, dist_cpu());
  e = dist_all_reduce(group, &b, &b, DIST_SUM, nullptr);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(dist_error_code(e), DIST_REVOKED);
  EXPECT_NE(std::string(dist_error_message(e)).find("done here"), std::string::npos);
  dist_error_destroy(e);
  dist_destroy(group);
}

TEST(Survival, BadSettingsFailInitWithTheVariableAndTheFix) {
  setenv("DIST_SURVIVAL", "maybe", 1);
  dist_process_group_t* group = nullptr;
  dist_error_t* e = InitAlone("bad_switch", &group);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(dist_error_code(e), DIST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dist_error_message(e)).find("DIST_SURVIVAL): 'maybe' is not a switch"),
            std::string::npos)
      << dist_error_message(e);
  dist_error_destroy(e);
  setenv("DIST_SURVIVAL", "1", 1);
  setenv("DIST_FAILURE_DETECT_MS", "5", 1);
  e = InitAlone("bad_bound", &group);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(std::string(dist_error_message(e)).find("DIST_FAILURE_DETECT_MS): '5'"),
            std::string::npos)
      << dist_error_message(e);
  dist_error_destroy(e);
  unsetenv("DIST_SURVIVAL");
  unsetenv("DIST_FAILURE_DETECT_MS");
}

}  // namespace
}  // namespace dist_survival

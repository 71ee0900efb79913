// A job of real processes that loses a rank and goes on: the ranks meet
// over file:// (a store no rank hosts), run all_reduce until the victim
// fails, then the survivors shrink and check the new group's collectives
// against values computed here. Shared by survival_test and shrink_bench.
#ifndef DIST_TESTS_SURVIVAL_SCENARIO_H_
#define DIST_TESTS_SURVIVAL_SCENARIO_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace dist_survival {

enum class Failure {
  kKill,    // the victim SIGKILLs itself: its sockets close
  kStop,    // the victim SIGSTOPs itself: silent, sockets open
  kRevoke,  // the victim calls dist_revoke and stays (shrink keeps everyone)
};

struct Scenario {
  std::string backend = "gloo";
  int world = 4;
  int victim = 2;
  Failure failure = Failure::kKill;
  int iterations_before = 3;  // successful all_reduces before the failure
  std::string dir;            // for the file:// store
  // > 0: meet over tcp://127.0.0.1:PORT instead, rank 0 hosting the store.
  // When rank 0 is the victim the store dies with it, and the survivors'
  // shrink must fail with an error that says so (it cannot agree).
  int tcp_port = 0;
  // >= 0: a second rank fails the same way at the same moment.
  int second_victim = -1;
  // The second victim dies later instead: once the group failed, while the
  // others run their shrink (SIGKILL, before it would join the agreement).
  bool second_dies_during_shrink = false;
  // kStop: once the survivors have shrunk, the victim is resumed; its own
  // shrink must then tell it that the others went on without it.
  bool resume_victim = false;
  // Until the failure, all_reduce through a work handle (issue, then
  // dist_work_wait) instead of the blocking call.
  bool asynchronous = false;
  // Once the survivors have shrunk, they grow back to the full world: the
  // test starts one joining process (DIST_JOIN=1) per lost rank once the
  // failure happened, and every rank checks the grown group's collectives.
  bool grow = false;

  // Whether rank `r` is one the survivors go on without.
  bool Lost(int r) const {
    return failure != Failure::kRevoke && (r == victim || r == second_victim);
  }
};

struct Outcome {
  // Per rank: empty when the rank did all it should, else what went wrong
  // (the victim of kKill/kStop is expected to be killed and reports "").
  std::vector<std::string> rank_errors;
  // From the failure to the slowest survivor's first successful collective
  // on the shrunk group.
  absl::Duration failure_to_first_collective;
  // From the failure to the slowest survivor's first error on the old group.
  absl::Duration failure_to_error;
  // grow: from the failure to the slowest rank's first successful
  // collective on the grown group (joiners included).
  absl::Duration failure_to_grown_collective;
};

inline Scenario MakeScenario(std::string backend, int world, int victim, Failure failure) {
  Scenario s;
  s.backend = std::move(backend);
  s.world = world;
  s.victim = victim;
  s.failure = failure;
  return s;
}

Outcome Run(const Scenario& scenario);

// An empty folder `name` under TEST_TMPDIR (else /tmp); "" if it cannot be made.
std::string TempDir(const std::string& name);

}  // namespace dist_survival

#endif  // DIST_TESTS_SURVIVAL_SCENARIO_H_

// A host that fork()s after dist_init (tests/core/fork_child_program.c),
// under distrun with real gloo and shm: the child's exit, and its use of
// its parent's group, must neither hang it nor end the parent's job. Before
// core/fork_guard, a child's dist_destroy ended the parent's shm job ("rank
// 0 destroyed its communicator") and hung on gloo; tests/mpi runs the same
// program under mpirun, where a child's plain exit hung in MPI_Finalize.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/subprocess.h"

namespace dist::testing {
namespace {

using ::testing::HasSubstr;

class ForkChild : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(ForkChild, LeavesTheParentsJobWhole) {
  const auto [backend, mode] = GetParam();
  ProcessResult r =
      Subprocess::Run({RunfilePath("tools/distrun/distrun"), "-n", "2", "--backend", backend,
                       RunfilePath("tests/core/fork_child_program"), mode},
                      {"DIST_TIMEOUT=20s", "DIST_PLUGIN_PATH=", "DIST_CONFIG="}, absl::Seconds(90));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank, "] rank ", rank,
                                              ": 21 all_reduces after the fork correct")));
    if (std::string(mode) == "use") {
      EXPECT_THAT(
          r.out, HasSubstr(absl::StrCat("[", rank, "] rank ", rank, " child: every call refused")));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ForkChild,
                         ::testing::Combine(::testing::Values("gloo", "shm"),
                                            ::testing::Values("exit", "use")));

}  // namespace
}  // namespace dist::testing

// The MPI build chosen for "mpi" and the checks of explicit names, from the
// launcher's variables (this test links no MPI, so none is in its global
// scope). The real launchers run in tests/mpi (core_mpi, *_mismatch).
#include "core/mpi_flavor.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dist {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class MpiFlavorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD"}) {
      unsetenv(name);
    }
  }
};

TEST_F(MpiFlavorTest, OtherNamesPassThrough) {
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(*ResolveMpiFlavor("gloo", "backend"), "gloo");
  EXPECT_EQ(*ResolveMpiFlavor("env", "init method"), "env");
  EXPECT_FALSE(IsMpiName("mpix"));
  EXPECT_TRUE(IsMpiName("mpi"));
}

TEST_F(MpiFlavorTest, MpiIsTheLaunchersBuild) {
  EXPECT_EQ(*ResolveMpiFlavor("mpi", "backend"), "openmpi");  // no launcher, no MPI linked
  setenv("PMI_RANK", "0", 1);
  EXPECT_EQ(*ResolveMpiFlavor("mpi", "backend"), "mpich");
  EXPECT_EQ(*ResolveMpiFlavor("mpich", "backend"), "mpich");
  // Open MPI's mpirun: OMPI_* decides even beside PMI-style variables.
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  EXPECT_EQ(*ResolveMpiFlavor("mpi", "init method"), "openmpi");
}

TEST_F(MpiFlavorTest, TheOtherBuildUnderALauncherNamesBoth) {
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  absl::StatusOr<std::string> r = ResolveMpiFlavor("mpich", "backend");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              AllOf(HasSubstr("backend 'mpich' is built for MPICH"),
                    HasSubstr("started by Open MPI's launcher (OMPI_COMM_WORLD_RANK is set)"),
                    HasSubstr("mpiexec.mpich")));
  unsetenv("OMPI_COMM_WORLD_RANK");
  setenv("PMI_FD", "5", 1);
  r = ResolveMpiFlavor("openmpi", "init method");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              AllOf(HasSubstr("init method 'openmpi://' is built for Open MPI"),
                    HasSubstr("MPICH's launcher (PMI_FD is set)")));
}

}  // namespace
}  // namespace dist

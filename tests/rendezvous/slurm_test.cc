// Slurm's host lists and task counts as srun sets them, and the env://
// defaults derived from them.
#include "support/slurm.h"

#include <stdlib.h>

#include "gtest/gtest.h"

namespace dist::support {
namespace {

TEST(FirstSlurmHostTest, TakesTheFirstHostOfEveryForm) {
  EXPECT_EQ(FirstSlurmHost("h1"), "h1");
  EXPECT_EQ(FirstSlurmHost("h2,h1"), "h2");
  EXPECT_EQ(FirstSlurmHost("n[01-04,7]"), "n01");
  EXPECT_EQ(FirstSlurmHost("n[3,5-6],gpu[1-2]"), "n3");
  EXPECT_EQ(FirstSlurmHost("rack[12-13]-ib,login"), "rack12-ib");
  EXPECT_EQ(FirstSlurmHost(""), std::nullopt);
  EXPECT_EQ(FirstSlurmHost("n[a-b]"), std::nullopt);
  EXPECT_EQ(FirstSlurmHost("n[1-2"), std::nullopt);
}

TEST(ExpandSlurmTasksPerNodeTest, ExpandsRepeats) {
  EXPECT_EQ(ExpandSlurmTasksPerNode("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(ExpandSlurmTasksPerNode("4"), (std::vector<int>{4}));
  EXPECT_EQ(ExpandSlurmTasksPerNode("2(x"), std::nullopt);
  EXPECT_EQ(ExpandSlurmTasksPerNode("x"), std::nullopt);
}

TEST(SlurmEnvironmentTest, DefaultsComeFromTheJob) {
  setenv("SLURM_JOB_NODELIST", "node[07-08]", 1);
  setenv("SLURM_JOB_ID", "123456", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "3,1", 1);
  setenv("SLURM_NODEID", "1", 1);
  EXPECT_EQ(SlurmMasterAddr(), "node07");
  EXPECT_EQ(SlurmMasterPort(), 10000 + 123456 % 20000);
  EXPECT_EQ(SlurmLocalWorldSize(), 1);
  setenv("SLURM_NODEID", "0", 1);
  EXPECT_EQ(SlurmLocalWorldSize(), 3);
  setenv("SLURM_NODEID", "2", 1);
  EXPECT_EQ(SlurmLocalWorldSize(), std::nullopt);
  unsetenv("SLURM_JOB_NODELIST");
  unsetenv("SLURM_JOB_ID");
  EXPECT_EQ(SlurmMasterAddr(), std::nullopt);
  EXPECT_EQ(SlurmMasterPort(), std::nullopt);
}

}  // namespace
}  // namespace dist::support

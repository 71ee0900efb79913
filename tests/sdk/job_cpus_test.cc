// dist::JobCpus (dist/cpp/job_cpus.hpp) in real processes with real
// affinity masks: a rank pinned to one core under a wider launcher counts
// the launcher's CPUs; a job confined as a whole counts the confinement.
#include "dist/cpp/job_cpus.hpp"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "gtest/gtest.h"

namespace dist {
namespace {

int OwnCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
}

// Pins the calling process to the lowest CPU it may run on.
bool PinToOneCpu() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return false;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &cpus)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  return false;
}

// Runs `body` in a child process and returns what it returned (its exit
// status), or -1 if it did not exit normally.
int InChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(JobCpus, AtLeastThisProcessesOwnAffinity) {
  ASSERT_GT(OwnCpus(), 0);
  EXPECT_GE(JobCpus(), OwnCpus());
  EXPECT_GE(JobCpus(), 1);
}

TEST(JobCpus, ARankPinnedToACoreCountsItsLaunchersCpus) {
  const int launcher_cpus = OwnCpus();
  if (launcher_cpus < 2) GTEST_SKIP() << "one CPU: pinning narrows nothing";
  // This process plays the launcher (mpirun binding each rank to a core).
  EXPECT_EQ(InChild([] { return PinToOneCpu() && OwnCpus() == 1 ? JobCpus() : 0; }), launcher_cpus);
}

TEST(JobCpus, AJobConfinedAsAWholeCountsTheConfinement) {
  if (OwnCpus() < 2) GTEST_SKIP() << "one CPU: confinement narrows nothing";
  // The child confines itself (taskset around the launcher), then starts
  // a rank, which inherits the one CPU.
  EXPECT_EQ(InChild([] {
              if (!PinToOneCpu()) return 0;
              return InChild([] { return JobCpus(); });
            }),
            1);
}

}  // namespace
}  // namespace dist

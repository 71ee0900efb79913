// How many CPUs a job's ranks may run on, as far as one rank can tell.
//
// For a plugin that decides whether its ranks may wait awake (spin or poll
// before they sleep): that pays only where each rank on the host has a CPU
// of its own; where ranks outnumber the CPUs, a spinning rank takes the CPU
// from the very rank it waits for.
//
// Why not just this process's affinity: launchers such as mpirun bind each
// rank to a core of its own, an affinity of 1 CPU, which says nothing about
// crowding (two ranks bound to two cores never take each other's CPU). So
// this is the wider of the rank's own affinity and its parent's (the
// launcher: mpirun, orted, slurmstepd, distrun, torchrun). A job confined
// as a whole (taskset or a cpuset around the launcher) shows in the
// launcher's affinity too. What it cannot see is ranks pinned by hand onto
// one shared core under an unpinned parent; a spin that is bounded and
// adaptive (as shm's and gloo's are) limits what that costs.
#ifndef DIST_CPP_JOB_CPUS_HPP_
#define DIST_CPP_JOB_CPUS_HPP_

#include <sched.h>
#include <unistd.h>

#include <initializer_list>

namespace dist {

// At least 1.
inline int JobCpus() {
  int widest = 1;
  for (pid_t pid : {getpid(), getppid()}) {
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    if (sched_getaffinity(pid, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) > widest) {
      widest = CPU_COUNT(&cpus);
    }
  }
  return widest;
}

}  // namespace dist

#endif  // DIST_CPP_JOB_CPUS_HPP_

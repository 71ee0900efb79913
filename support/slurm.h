// What a Slurm job step tells about where rank 0 runs, so that env:// works
// under `srun` without MASTER_ADDR/MASTER_PORT:
// - MASTER_ADDR defaults to the first host of SLURM_JOB_NODELIST: Slurm
//   gives task 0 to the first node of the allocation.
// - MASTER_PORT defaults to 10000 + SLURM_JOB_ID % 20000: the same on every
//   node of a job, different for jobs that share a node (unless their ids
//   are 20000 apart), and below Linux's ephemeral ports (32768 and up).
// - LOCAL_WORLD_SIZE defaults to this node's count in
//   SLURM_STEP_TASKS_PER_NODE ("2(x3),1"), indexed by SLURM_NODEID.
#ifndef DIST_SUPPORT_SLURM_H_
#define DIST_SUPPORT_SLURM_H_

#include <optional>
#include <string>
#include <vector>

namespace dist::support {

// The first host of a Slurm host list: "n[01-04,7],gpu1" -> "n01".
// nullopt for an empty or malformed list.
std::optional<std::string> FirstSlurmHost(const std::string& nodelist);

// "2(x3),1" -> {2, 2, 2, 1}; nullopt when malformed.
std::optional<std::vector<int>> ExpandSlurmTasksPerNode(const std::string& text);

// From the environment; nullopt when the variables are unset or malformed.
std::optional<std::string> SlurmMasterAddr();
std::optional<int> SlurmMasterPort();
std::optional<int> SlurmLocalWorldSize();

}  // namespace dist::support

#endif  // DIST_SUPPORT_SLURM_H_

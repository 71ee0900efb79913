// Bringing a communicator's ranks onto one segment through the store:
// check that all ranks share a host, let rank 0 create the segment under a
// fresh random name, attach everyone, and unlink the name as soon as all
// ranks have mapped it (so nothing is left in /dev/shm even after a crash).
#ifndef DIST_PLUGINS_BACKENDS_SHM_BOOTSTRAP_H_
#define DIST_PLUGINS_BACKENDS_SHM_BOOTSTRAP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "segment.h"

namespace dist_shm {

struct Tuning {
  uint64_t slot_bytes = 0;  // 0: by world size
  uint64_t ring_bytes = 0;  // 0: by world size
  // Spin before sleeping on the futex, 50 us by default (shm.spin_us).
  absl::Duration spin = absl::Microseconds(50);
  // When the ranks outnumber the CPUs the job may run on (this process's
  // affinity or its launcher's, whichever is wider: mpirun binds each rank
  // to one core), the spin yields the CPU at every turn instead of pausing:
  // a rank that held the CPU would keep the peer it waits for off it, while
  // one that sleeps pays a wake-up (tens of microseconds) per step.
  bool spin_yields = false;
  // shm.inline_wait=0: every operation runs on the worker thread.
  bool inline_wait = true;
  // Whether a rank that writes a large block into the segment for others
  // (broadcast's and scatter's root, all_to_all's blocks) uses non-temporal
  // stores (stream_copy.h). By default where each rank has a CPU of its
  // own (ranks <= JobCpus): readers are on other cores then, and the lines
  // they take come from memory instead of from the writer's cache; where
  // ranks share cores a reader often runs on the writer's core, whose
  // cache it would have hit (4 ranks on 2 CPUs: all_to_all 256 KiB 70-74 us
  // with them against 30-36 without). shm.stream_stores=0/1 decides.
  bool stream_stores = false;
};

// Reads the shm.* options (README.md, "Options") over the defaults.
absl::StatusOr<Tuning> ParseTuning(const dist_comm_config_t& config);

// Collective over config.rank/world_size. On success this rank is attached
// and registered (state kActive) and every rank has attached.
absl::StatusOr<std::unique_ptr<Segment>> JoinSegment(const dist_comm_config_t& config,
                                                     const Tuning& tuning,
                                                     const std::string& group);

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_BOOTSTRAP_H_

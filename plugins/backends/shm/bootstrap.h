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
};

// Reads "shm.slot_bytes", "shm.ring_bytes" and "shm.spin_us" from the options.
absl::StatusOr<Tuning> ParseTuning(const dist_comm_config_t& config);

// Collective over config.rank/world_size. On success this rank is attached
// and registered (state kActive) and every rank has attached.
absl::StatusOr<std::unique_ptr<Segment>> JoinSegment(const dist_comm_config_t& config,
                                                     const Tuning& tuning,
                                                     const std::string& group);

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_BOOTSTRAP_H_

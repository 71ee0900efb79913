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
#include "single_copy.h"
#include "stream_copy.h"

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
  // The smallest block that a rank writing into the segment for others
  // (broadcast's and scatter's root, all_to_all's blocks) writes with
  // non-temporal stores (stream_copy.h); kNeverStream: none.
  // Where each rank has a CPU of its own (ranks <= JobCpus), from
  // kStreamCopyBytes: readers are on other cores, and the lines they take
  // come from memory instead of from the writer's cache. Where ranks share
  // cores, a reader often runs on the writer's core, whose cache it would
  // have hit (4 ranks on 2 CPUs: all_to_all 256 KiB 70-74 us with them
  // against 30-36 without), but blocks of kSharedCpuStreamBytes and more
  // outgrow that cache before the reader runs, and writing around it spares
  // the reads of every line before it is written (the same ranks: scatter
  // 4-16 MiB 1.8-2.4x Open MPI's time without, 0.7-1.0 with; broadcast
  // 1-4 MiB 1.4-1.7x faster). shm.stream_stores=1 (from kStreamCopyBytes)
  // or 0 (never) decides instead.
  uint64_t stream_from_bytes = kNeverStream;
  // The smallest send/recv message sent by reference and read by its
  // receiver in one copy (single_copy.h), where the receiver can read the
  // sender's memory; shm.single_copy_bytes, 0 for never (kNeverSingleCopy).
  uint64_t single_copy_from_bytes = kSingleCopyBytes;
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

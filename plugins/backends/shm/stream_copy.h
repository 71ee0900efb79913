// Copies into the segment that another process reads next.
//
// A plain memcpy leaves the written lines modified in this core's cache, and
// each one the reader then takes is a transfer of a dirty line between
// cores. On this project's virtual machine that transfer is cheap at times
// and several times slower at others (the hypervisor's placement of the
// virtual CPUs, presumably on different dies): a 16 KiB hand-off between
// two pinned processes took 1.5-2 us in one phase and 7-10 us in the other,
// 256 KiB 36 us and 132-164 us. Non-temporal stores write around the cache,
// so the reader takes the lines from memory: 2.3-2.9 us at 16 KiB and
// 24-28 us at 256 KiB in both phases. Below kStreamCopyBytes a plain memcpy
// is faster in the good phase, and the data is small enough that the bad
// phase costs little. Only for data the writer does not read again (it
// would come from memory too): Collectives::WriteForOthers (the phase's
// measurements are in the git history of README.md).
#ifndef DIST_PLUGINS_BACKENDS_SHM_STREAM_COPY_H_
#define DIST_PLUGINS_BACKENDS_SHM_STREAM_COPY_H_

#include <cstddef>
#include <cstdint>

namespace dist_shm {

inline constexpr size_t kStreamCopyBytes = 32 << 10;
// Where ranks share CPUs, only blocks this large go around the cache
// (Tuning::stream_from_bytes).
inline constexpr uint64_t kSharedCpuStreamBytes = 1 << 20;
// No block does (shm.stream_stores=0).
inline constexpr uint64_t kNeverStream = ~uint64_t{0};

// memcpy(dst, src, bytes), with non-temporal stores from kStreamCopyBytes
// on (where the CPU has them). The stores are fenced before it returns, so
// a release store after it publishes them as it would a memcpy's.
void CopyToShared(void* dst, const void* src, size_t bytes);

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_STREAM_COPY_H_

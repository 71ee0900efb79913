// Single-copy transfers: a receiver reads a large message straight out of
// its sender's buffer with process_vm_readv (Linux cross-memory attach),
// instead of the sender copying it into a ring and the receiver copying it
// out. One copy instead of two, and none of it through the shared segment.
//
// The kernel allows the read only where the receiver may ptrace the sender
// (same user, and Yama's ptrace_scope 0, or CAP_SYS_PTRACE); a seccomp
// filter may forbid the call. So nothing is assumed: at comm_create each
// rank publishes the address of a random word in its own memory, and each
// receiver tries to read every peer's word. Where it reads the right value,
// it tells that sender (RingControl::single_copy) that it may send by
// reference; elsewhere the ring carries everything, as before. dist never
// loosens the host's ptrace policy to make this work (Open MPI calls
// prctl(PR_SET_PTRACER_ANY); a library inside someone else's process must
// not).
#ifndef DIST_PLUGINS_BACKENDS_SHM_SINGLE_COPY_H_
#define DIST_PLUGINS_BACKENDS_SHM_SINGLE_COPY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "segment.h"

namespace dist_shm {

// The smallest send/recv message sent by reference by default
// (Tuning::single_copy_from_bytes), and the value for never.
inline constexpr uint64_t kSingleCopyBytes = 256 << 10;
inline constexpr uint64_t kNeverSingleCopy = UINT64_MAX;

// What a by-reference message carries in the ring instead of its payload.
struct Reference {
  uint64_t address;   // of the payload in the sender's memory
  uint64_t sequence;  // 1, 2, ... per ordered pair: the receiver's ack
};
static_assert(sizeof(Reference) == 16);

// Publishes this process's probe word in its rank control block.
void PublishProbe(RankControl& self);

// This rank's side of reading its peers: which it may read, each pinned by
// a pidfd so that a read can tell it came from the peer and not from a
// process that took the peer's pid after it exited.
class PeerReader {
 public:
  // After every rank has published its probe (JoinSegment returned): for
  // each peer, whether this rank can read its memory, written into the ring
  // from that peer so that the peer sends by reference. `enabled` false
  // (shm.single_copy_bytes=0) writes "no" everywhere.
  PeerReader(Segment& segment, int rank, bool enabled);
  ~PeerReader();
  PeerReader(const PeerReader&) = delete;
  PeerReader& operator=(const PeerReader&) = delete;

  // Why some peer cannot send by reference, for the log; empty when all can.
  const std::string& unreadable() const { return unreadable_; }

  // Reads `bytes` at `address` in `peer`'s memory into `to`, all of it.
  // DATA_LOSS when the read fails or the peer has exited by its end (what
  // was read may then be another process's).
  absl::Status Read(int peer, uint64_t address, void* to, uint64_t bytes) const;

 private:
  bool Exited(int peer) const;

  Segment* segment_;
  std::vector<int> pidfds_;  // by peer; -1 for this rank and peers not read
  std::string unreadable_;
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_SINGLE_COPY_H_

// The shared-memory segment's layout. Every rank of a communicator maps the
// same segment; everything in it is either written once at creation or is a
// lock-free atomic, so a process that dies mid-operation never leaves a lock
// held (there are no locks).
#ifndef DIST_PLUGINS_BACKENDS_SHM_LAYOUT_H_
#define DIST_PLUGINS_BACKENDS_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace dist_shm {

inline constexpr uint64_t kMagic = 0x316d687374736964ull;  // "distshm1"
// 2: arrived and signatures on one line; 3: flagged lines for small reductions;
// 4: one flagged line, not five; 5: three signatures of 16 bytes, eager cells;
// 6: the eager depth in the header, room for kMaxEagerDepth entries;
// 7: single-copy probes and acks (single_copy.h); 8: RingControl::skip_from.
inline constexpr uint32_t kLayoutVersion = 8;
inline constexpr size_t kReasonBytes = 240;

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// What a rank is doing, as its peers see it.
enum RankState : uint32_t {
  kJoining = 0,  // not attached yet
  kActive = 1,
  kFailed = 2,   // an operation failed; reason says why
  kAborted = 3,  // comm_abort was called; reason is the caller's
  kLeft = 4,     // comm_destroy ran
};

// One collective as issued on one rank; compared across ranks so that a
// mismatch is an error instead of garbage or a hang.
struct OpSignature {
  uint64_t count;  // elements per rank block ("n" in backend_plugin.h)
  int32_t root;
  uint8_t collective;  // dist_collective_t
  uint8_t dtype;       // dist_dtype_t
  uint8_t op;          // dist_reduce_op_t
  uint8_t unused;      // zero
};
static_assert(sizeof(OpSignature) == 16);

// Signatures a rank keeps, by collective count modulo this. A rank that
// returns from a collective without waiting for its peers (the root of a
// small broadcast: Collectives) compares their signatures at its next
// operation; by then a peer can have begun at most the two collectives
// after it, so three never overwrite the one compared.
inline constexpr int kSignatures = 3;

struct alignas(64) Header {
  uint64_t magic;
  uint32_t version;
  int32_t world_size;
  uint64_t slot_bytes;  // collective staging bytes per rank and buffer
  uint64_t ring_bytes;  // point-to-point ring bytes per ordered pair
  uint64_t total_bytes;
  uint32_t eager_depth;  // entries of the eager area in use, <= kMaxEagerDepth
  alignas(64) std::atomic<int32_t> attached;
};

// A cache line that carries the sequence number of the unit that wrote it,
// so that a reader gets a small message's bytes in the same transfer that
// tells it they are there (one cache miss instead of two: flag, then data).
// The writer fills the bytes, then stores seq (release).
struct alignas(64) FlaggedLine {
  std::atomic<uint64_t> seq;
  char bytes[56];
};
static_assert(sizeof(FlaggedLine) == 64);

// Flagged lines per rank and buffer half. Line 0 holds the operation's
// signature and the first 40 bytes of data; each further line 56 bytes.
// One: with more, a reader polls, checks and gathers several lines, and at
// 2 ranks the slots' path (copy in, arrival counter, reduce) was level with
// two lines at 64 B and faster with three to five (128-256 B: 0.28-0.30 us
// against 0.33-0.34, Open MPI 0.28-0.31).
inline constexpr int kFlaggedLines = 1;
inline constexpr uint64_t kFlaggedLineBytes = sizeof(FlaggedLine::bytes);
inline constexpr uint64_t kFlaggedHeadBytes = kFlaggedLineBytes - sizeof(OpSignature);
inline constexpr uint64_t kFlaggedBytes =
    kFlaggedHeadBytes + (kFlaggedLines - 1) * kFlaggedLineBytes;  // 40

// Per-rank control block. Fields written by the owner and fields written by
// others live on separate cache lines, and so do the owner's rarely written
// fields and the ones it writes every operation: a peer's check of
// `sleeping` (every step) stays a cache hit, and the step's one transfer of
// `arrived` brings the signature with it.
struct alignas(64) RankControl {
  // Written by others: the futex word the owner sleeps on.
  std::atomic<uint32_t> bell;
  // Written by the owner, rarely.
  alignas(64) std::atomic<uint32_t> sleeping;  // 1 while it may sleep on bell
  std::atomic<uint32_t> state;                 // RankState
  int32_t pid;
  uint64_t start_time;  // /proc/<pid>/stat field 22: tells pid reuse apart
  // A word in the owner's memory and its value, for peers to try a
  // single-copy read of (single_copy.h).
  uint64_t probe_address;
  uint64_t probe_value;
  // Written by the owner at every collective, on one cache line.
  alignas(64) std::atomic<uint64_t> arrived;  // last barrier sequence number reached
  OpSignature signature[kSignatures];         // by collective count, modulo
  alignas(64) char reason[kReasonBytes];      // valid once state is kFailed/kAborted
  // Written by the owner: small reductions' data, by buffer half.
  FlaggedLine flagged[2][kFlaggedLines];
};
static_assert(offsetof(RankControl, signature) + sizeof(RankControl::signature) <=
                  offsetof(RankControl, arrived) + 64,
              "arrived and the signatures share one cache line");

// Entries of the eager area: a rooted operation whose blocks fit a cell
// (kEagerBytes) takes unit u's entry u % depth, so its writers may run that
// many units ahead of their readers (Collectives). The area has room for
// kMaxEagerDepth entries; the creator chooses the depth (Header::eager_depth):
// kEagerDepth where each rank has a CPU of its own, where 16 entries keep
// the cells a loop cycles through in the first-level cache, and
// kMaxEagerDepth where ranks share CPUs, where a writer that must wait for
// a reader yields its CPU, and 64 entries let it do so 4 times less often
// (4 ranks on 2 CPUs: an 8 B broadcast 1.14-1.36 -> 0.58-0.59 us, at
// 2 ranks on 2 CPUs 64 entries were 0-15% slower).
inline constexpr int kEagerDepth = 16;
inline constexpr int kMaxEagerDepth = 64;

// One rank's block of one eager unit: data first, then the writer's
// signature and the unit's number (release), on the first line with the
// first 40 bytes, so that a reader of a small block gets it in the transfer
// that tells it the block is there.
struct alignas(64) EagerCell {
  std::atomic<uint64_t> seq;  // the unit that wrote it last
  OpSignature signature;      // the writer's call
  char data[1064];
};
static_assert(sizeof(EagerCell) == 1088);
inline constexpr uint64_t kEagerBytes = sizeof(EagerCell::data);

// RingControl::single_copy: whether the receiver can read the sender's
// memory (single_copy.h).
enum SingleCopy : uint32_t {
  kSingleCopyUndecided = 0,  // not probed yet: send through the ring
  kSingleCopyYes = 1,
  kSingleCopyNo = 2,
};

// Single-producer single-consumer byte ring for one ordered pair of ranks.
struct alignas(64) RingControl {
  std::atomic<uint64_t> head;  // bytes written, by the sender
  // Written by the sender before the head that follows: a sender may start
  // its next message at the ring's start instead of where the last one
  // ended (PointToPoint::StartOfMessage), and leaves here the position it
  // skipped from, where the receiver then jumps to the next lap. On the
  // head's line, which the receiver reads anyway.
  std::atomic<uint64_t> skip_from;
  alignas(64) std::atomic<uint64_t> tail;  // bytes consumed, by the receiver
  // Written by the receiver, for by-reference messages (single_copy.h):
  // the sequence number of the last one it has read, and whether the
  // sender may send by reference (SingleCopy).
  alignas(64) std::atomic<uint64_t> references_taken;
  std::atomic<uint32_t> single_copy;
};

// A point-to-point message header in a ring. Messages are padded to 16
// bytes so a header never wraps around the ring's end. A by-reference
// message has kByReference set in `bytes` and carries a Reference
// (single_copy.h) in the ring instead of its payload.
struct MessageHeader {
  int64_t tag;
  uint64_t bytes;
};
static_assert(sizeof(MessageHeader) == 16);
inline constexpr uint64_t kByReference = uint64_t{1} << 63;

// Where each part lies from the segment's start (byte offsets), for a
// geometry: the header, the ranks' control blocks, the rings' controls, the
// eager area, the staging slots (page aligned), the ring data; `total`
// is the segment's size.
struct Offsets {
  uint64_t ranks, rings, eager, slots, ring_data, total;
};

inline constexpr uint64_t kPage = 4096;

// value rounded up to a multiple of align; false when that overflows.
inline bool RoundUp(uint64_t value, uint64_t align, uint64_t* out) {
  uint64_t sum = 0;
  if (__builtin_add_overflow(value, align - 1, &sum)) return false;
  *out = sum / align * align;
  return true;
}

// The offsets for this geometry; false when a size overflows (a slot_bytes
// of 2^63, or a header another process corrupted).
inline bool ComputeOffsets(int32_t world_size, uint64_t slot_bytes, uint64_t ring_bytes,
                           Offsets* o) {
  if (world_size < 1) return false;
  const uint64_t w = static_cast<uint64_t>(world_size);
  uint64_t rank_bytes, ring_controls, eager, slots, rings;
  bool ok = RoundUp(sizeof(Header), 64, &o->ranks) &&
            !__builtin_mul_overflow(w, sizeof(RankControl), &rank_bytes) &&
            !__builtin_add_overflow(o->ranks, rank_bytes, &o->rings) &&
            !__builtin_mul_overflow(w * w, sizeof(RingControl), &ring_controls) &&
            !__builtin_add_overflow(o->rings, ring_controls, &o->eager) &&
            !__builtin_mul_overflow(kMaxEagerDepth * w, sizeof(EagerCell), &eager) &&
            !__builtin_add_overflow(o->eager, eager, &o->slots) &&
            RoundUp(o->slots, kPage, &o->slots) &&
            !__builtin_mul_overflow(2 * w, slot_bytes, &slots) &&
            !__builtin_add_overflow(o->slots, slots, &o->ring_data) &&
            !__builtin_mul_overflow(w * w, ring_bytes, &rings) &&
            !__builtin_add_overflow(o->ring_data, rings, &o->total) &&
            RoundUp(o->total, kPage, &o->total);
  return ok && o->total <= static_cast<uint64_t>(PTRDIFF_MAX);
}

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_LAYOUT_H_

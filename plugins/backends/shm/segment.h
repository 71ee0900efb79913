// One POSIX shared-memory segment shared by the ranks of a communicator:
// creation (rank 0), attaching (the others), and typed access to its parts.
#ifndef DIST_PLUGINS_BACKENDS_SHM_SEGMENT_H_
#define DIST_PLUGINS_BACKENDS_SHM_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "layout.h"

namespace dist_shm {

// Bounds of shm.slot_bytes and shm.ring_bytes (also checked in a header that
// another process wrote): at least a page, at most 1 GiB, multiples of 64.
inline constexpr uint64_t kMinSlotBytes = 4096;
inline constexpr uint64_t kMaxSlotBytes = uint64_t{1} << 30;
bool ValidSizes(uint64_t slot_bytes, uint64_t ring_bytes);

// A name for a new segment that no other process picks: `prefix`
// ("/dist-shm-"), this pid, 96 random bits. Not guessable either, so that
// another user cannot take it first (Create would then fail).
std::string UniqueSegmentName(const std::string& prefix);

struct Geometry {
  int32_t world_size = 0;
  uint64_t slot_bytes = 0;
  uint64_t ring_bytes = 0;
  int eager_depth = kEagerDepth;  // 1..kMaxEagerDepth (layout.h)
};

class Segment {
 public:
  // Creates, sizes (memory reserved up front, so a full /dev/shm is an error
  // here rather than a SIGBUS later) and maps a new segment. Fails if `name`
  // exists.
  static absl::StatusOr<std::unique_ptr<Segment>> Create(const std::string& name,
                                                         const Geometry& geometry);
  // Maps an existing segment and checks it was made for `world_size` ranks.
  static absl::StatusOr<std::unique_ptr<Segment>> Attach(const std::string& name,
                                                         int32_t world_size);
  // Removes the name; mappings stay valid. A missing name is not an error.
  static void Unlink(const std::string& name);

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const std::string& name() const { return name_; }
  int32_t world_size() const { return world_size_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t ring_bytes() const { return ring_bytes_; }
  int eager_depth() const { return eager_depth_; }

  Header& header() { return *static_cast<Header*>(base_); }
  RankControl& rank(int r) { return ranks_[r]; }
  RingControl& ring(int src, int dst) { return rings_[src * world_size_ + dst]; }
  char* ring_data(int src, int dst) {
    return ring_data_ + (static_cast<uint64_t>(src) * world_size_ + dst) * ring_bytes_;
  }
  // The cell of `rank` in eager entry `entry` (< eager_depth()).
  EagerCell& eager(int entry, int rank) { return eager_[entry * world_size_ + rank]; }
  // Staging area of `rank` in double-buffer half `buffer` (0 or 1). The
  // areas of one half are contiguous: slot(b, 0) spans world_size slots.
  char* slot(int buffer, int rank) {
    return slots_ + (static_cast<uint64_t>(buffer) * world_size_ + rank) * slot_bytes_;
  }

 private:
  Segment(std::string name, void* base, size_t size);
  void Locate(int32_t world_size, uint64_t slot_bytes, uint64_t ring_bytes);

  std::string name_;
  void* base_;
  size_t size_;
  int32_t world_size_ = 0;
  uint64_t slot_bytes_ = 0;
  uint64_t ring_bytes_ = 0;
  int eager_depth_ = kEagerDepth;
  RankControl* ranks_ = nullptr;
  RingControl* rings_ = nullptr;
  EagerCell* eager_ = nullptr;
  char* slots_ = nullptr;
  char* ring_data_ = nullptr;
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_SEGMENT_H_

#include "segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace dist_shm {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t RoundUp(uint64_t value, uint64_t align) {
  return (value + align - 1) / align * align;
}

struct Offsets {
  uint64_t ranks, rings, slots, ring_data, total;
};

Offsets ComputeOffsets(int32_t world_size, uint64_t slot_bytes, uint64_t ring_bytes) {
  const uint64_t w = static_cast<uint64_t>(world_size);
  Offsets o;
  o.ranks = RoundUp(sizeof(Header), 64);
  o.rings = o.ranks + w * sizeof(RankControl);
  o.slots = RoundUp(o.rings + w * w * sizeof(RingControl), kPage);
  o.ring_data = o.slots + 2 * w * slot_bytes;
  o.total = RoundUp(o.ring_data + w * w * ring_bytes, kPage);
  return o;
}

std::string Errno() { return std::strerror(errno); }

}  // namespace

Segment::Segment(std::string name, void* base, size_t size)
    : name_(std::move(name)), base_(base), size_(size) {}

Segment::~Segment() { munmap(base_, size_); }

void Segment::Locate(int32_t world_size, uint64_t slot_bytes, uint64_t ring_bytes) {
  const Offsets o = ComputeOffsets(world_size, slot_bytes, ring_bytes);
  char* base = static_cast<char*>(base_);
  world_size_ = world_size;
  slot_bytes_ = slot_bytes;
  ring_bytes_ = ring_bytes;
  ranks_ = reinterpret_cast<RankControl*>(base + o.ranks);
  rings_ = reinterpret_cast<RingControl*>(base + o.rings);
  slots_ = base + o.slots;
  ring_data_ = base + o.ring_data;
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Create(const std::string& name,
                                                         const Geometry& g) {
  const Offsets o = ComputeOffsets(g.world_size, g.slot_bytes, g.ring_bytes);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "shm: cannot create shared memory segment ", name, ": ", Errno(),
        "; check that /dev/shm is mounted and writable"));
  }
  // posix_fallocate reserves the pages now: on a full /dev/shm this fails
  // cleanly instead of killing a rank with SIGBUS on first touch.
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(o.total));
  if (rc != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(absl::StrCat(
        "shm: cannot reserve ", o.total, " bytes in /dev/shm for segment ", name,
        ": ", std::strerror(rc),
        "; free space in /dev/shm (df -h /dev/shm) or lower shm.slot_bytes/shm.ring_bytes"));
  }
  void* base = mmap(nullptr, o.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("shm: cannot map segment ", name, ": ", Errno()));
  }
  std::unique_ptr<Segment> segment(new Segment(name, base, o.total));
  // Fresh pages are zero; constructing the control structures in place makes
  // the atomics formally alive.
  Header* header = new (base) Header();
  header->magic = kMagic;
  header->version = kLayoutVersion;
  header->world_size = g.world_size;
  header->slot_bytes = g.slot_bytes;
  header->ring_bytes = g.ring_bytes;
  header->total_bytes = o.total;
  segment->Locate(g.world_size, g.slot_bytes, g.ring_bytes);
  for (int r = 0; r < g.world_size; ++r) new (&segment->ranks_[r]) RankControl();
  for (int i = 0; i < g.world_size * g.world_size; ++i) new (&segment->rings_[i]) RingControl();
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return segment;
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Attach(const std::string& name,
                                                         int32_t world_size) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "shm: cannot open shared memory segment ", name, " that rank 0 created: ",
        Errno(), "; all ranks must run on one host and see the same /dev/shm "
        "(rank 0 removes it if others take longer than the timeout to attach)"));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < sizeof(Header)) {
    close(fd);
    return absl::InternalError(absl::StrCat("shm: segment ", name, " is truncated"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shm: cannot map segment ", name, ": ", Errno()));
  }
  std::unique_ptr<Segment> segment(new Segment(name, base, size));
  const Header& header = segment->header();
  if (header.magic != kMagic || header.version != kLayoutVersion ||
      header.world_size != world_size || header.total_bytes != size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shm: segment ", name, " does not match this communicator (world size ",
        header.world_size, " vs ", world_size, ", layout version ", header.version,
        " vs ", kLayoutVersion, "); all ranks must load the same shm plugin version"));
  }
  segment->Locate(header.world_size, header.slot_bytes, header.ring_bytes);
  return segment;
}

void Segment::Unlink(const std::string& name) { shm_unlink(name.c_str()); }

}  // namespace dist_shm

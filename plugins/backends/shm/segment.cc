#include "segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dist_shm {
namespace {

std::string Errno() { return std::strerror(errno); }

}  // namespace

std::string UniqueSegmentName(const std::string& prefix) {
  unsigned char bytes[12];
  if (getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    // Unique still (pid and time), if guessable.
    const uint64_t mix =
        static_cast<uint64_t>(getpid()) ^ static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
    std::memcpy(bytes, &mix, sizeof(mix));
  }
  return absl::StrCat(prefix, getpid(), "-",
                      absl::BytesToHexString(
                          absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes))));
}

bool ValidSizes(uint64_t slot_bytes, uint64_t ring_bytes) {
  for (uint64_t bytes : {slot_bytes, ring_bytes}) {
    if (bytes < kMinSlotBytes || bytes > kMaxSlotBytes || bytes % 64 != 0) return false;
  }
  return true;
}

Segment::Segment(std::string name, void* base, size_t size)
    : name_(std::move(name)), base_(base), size_(size) {}

Segment::~Segment() { munmap(base_, size_); }

void Segment::Locate(int32_t world_size, uint64_t slot_bytes, uint64_t ring_bytes) {
  Offsets o{};
  ComputeOffsets(world_size, slot_bytes, ring_bytes, &o);  // checked by Create/Attach
  char* base = static_cast<char*>(base_);
  world_size_ = world_size;
  slot_bytes_ = slot_bytes;
  ring_bytes_ = ring_bytes;
  ranks_ = reinterpret_cast<RankControl*>(base + o.ranks);
  rings_ = reinterpret_cast<RingControl*>(base + o.rings);
  eager_ = reinterpret_cast<EagerCell*>(base + o.eager);
  slots_ = base + o.slots;
  ring_data_ = base + o.ring_data;
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Create(const std::string& name,
                                                         const Geometry& g) {
  Offsets o{};
  if (!ComputeOffsets(g.world_size, g.slot_bytes, g.ring_bytes, &o)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm: a segment for ", g.world_size, " ranks with shm.slot_bytes=", g.slot_bytes,
        " and shm.ring_bytes=", g.ring_bytes, " would be larger than memory can be; lower them"));
  }
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("shm: cannot create shared memory segment ", name,
                                               ": ", Errno(),
                                               "; check that /dev/shm is mounted and writable"));
  }
  // posix_fallocate reserves the pages now: on a full /dev/shm this fails
  // cleanly instead of killing a rank with SIGBUS on first touch.
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(o.total));
  if (rc != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return absl::ResourceExhaustedError(absl::StrCat(
        "shm: cannot reserve ", o.total, " bytes in /dev/shm for segment ", name, ": ",
        std::strerror(rc),
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
  header->eager_depth = static_cast<uint32_t>(std::clamp(g.eager_depth, 1, kMaxEagerDepth));
  segment->Locate(g.world_size, g.slot_bytes, g.ring_bytes);
  segment->eager_depth_ = static_cast<int>(header->eager_depth);
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
        "shm: cannot open shared memory segment ", name, " that rank 0 created: ", Errno(),
        "; all ranks must run on one host and see the same /dev/shm "
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
    return absl::FailedPreconditionError(
        absl::StrCat("shm: segment ", name, " does not match this communicator (world size ",
                     header.world_size, " vs ", world_size, ", layout version ", header.version,
                     " vs ", kLayoutVersion, "); all ranks must load the same shm plugin version"));
  }
  // Another process wrote the header: every size in it must be one this
  // plugin could have chosen and must describe exactly the mapped bytes,
  // or Locate would point past the mapping.
  Offsets o{};
  if (!ValidSizes(header.slot_bytes, header.ring_bytes) || header.eager_depth < 1 ||
      header.eager_depth > static_cast<uint32_t>(kMaxEagerDepth) ||
      !ComputeOffsets(header.world_size, header.slot_bytes, header.ring_bytes, &o) ||
      o.total != size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shm: segment ", name, " has a corrupt header (slot_bytes ", header.slot_bytes,
        ", ring_bytes ", header.ring_bytes, ", eager_depth ", header.eager_depth, ", ", size,
        " bytes mapped); all ranks must load the same shm plugin version, and nothing else may "
        "write /dev/shm",
        name));
  }
  segment->Locate(header.world_size, header.slot_bytes, header.ring_bytes);
  segment->eager_depth_ = static_cast<int>(header.eager_depth);
  return segment;
}

void Segment::Unlink(const std::string& name) { shm_unlink(name.c_str()); }

}  // namespace dist_shm

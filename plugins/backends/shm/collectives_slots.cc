// The collectives over the staging slots (collectives.h): units through
// the halves of the double buffer, large messages in slot-sized chunks. Each
// collective first picks its path: small rooted operations go to the eager
// area (collectives_eager.cc), small all-reduces to flagged lines
// (collectives_flagged.cc).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "collectives.h"
#include "collectives_internal.h"
#include "dist/cpp/status.hpp"
#include "stream_copy.h"

namespace dist_shm {
namespace {

// Elements [begin, end) of a chunk of `count` elements that rank q reduces;
// boundaries fall on 64-byte multiples so ranks don't share cache lines.
void Segmentation(uint64_t count, int world, size_t element, int q, uint64_t* begin,
                  uint64_t* len) {
  const uint64_t align = std::max<uint64_t>(1, 64 / element);
  uint64_t per = (count + world - 1) / world;
  per = (per + align - 1) / align * align;
  const uint64_t b = std::min<uint64_t>(count, per * q);
  *begin = b;
  *len = std::min<uint64_t>(count, b + per) - b;
}

}  // namespace

void Collectives::PublishUnit() {
  Arrive();
  // Now: nothing later in this operation would wake the readers.
  waiter_->NotifyOthers();
  check_signature_ = false;
  published_ = true;
}

void Collectives::ReduceSlots(int buffer, uint64_t offset, uint64_t len, dist_dtype_t dtype,
                              dist_reduce_op_t op, void* dest) {
  for (int q = 0; q < world_; ++q) rows_[q] = segment_->slot(buffer, q) + offset;
  ReduceRows(len, dtype, op, dest);
}

// reader < 0: all_reduce (every rank gets the result); else reduce to reader.
absl::Status Collectives::AllReduce(const dist_op_args_t& a, int reader, const OpContext& c) {
  const uint64_t n = a.send.count;
  const dist_dtype_t dtype = a.send.dtype;
  const size_t element = dist_dtype_size(dtype);
  const bool reads = reader < 0 || reader == rank_;
  Begin(reader < 0 ? DIST_COLL_ALL_REDUCE : DIST_COLL_REDUCE, a, dtype, n);
  if (n == 0) return EmptyStep(c);
  if (reader >= 0 && n * element <= kEagerBytes) return EagerGather(a, /*reduce=*/true, c);
  DIST_RETURN_IF_ERROR(AwaitWritable(c));
  const char* send = Bytes(a.send.data);
  char* recv = reads ? Bytes(a.recv.data) : nullptr;
  const uint64_t bytes = n * element;

  if (bytes <= kFlaggedBytes) return FlaggedAllReduce(a, c);  // all_reduce: reduce went eager
  if (bytes <= OneUnitReduceBytes(reader, world_, segment_->slot_bytes())) {
    const int b = NextBuffer();
    // Only the root of a reduce reads, so it reduces its own data where it
    // lies, unless recv overlaps it: ReduceRows copies rank 0's row into
    // recv first (in place on rank 0 that copy is skipped).
    const uintptr_t s = reinterpret_cast<uintptr_t>(send);
    const uintptr_t r = reinterpret_cast<uintptr_t>(recv);
    const bool apart = s + bytes <= r || r + bytes <= s;
    const bool root_reads_send = reader == rank_ && (apart || (s == r && rank_ == 0));
    if (!root_reads_send) std::memcpy(segment_->slot(b, rank_), send, bytes);
    if (!reads) {  // reduce: one-sided (collectives.h)
      PublishUnit();
      return absl::OkStatus();
    }
    DIST_RETURN_IF_ERROR(Step(c));
    for (int q = 0; q < world_; ++q) rows_[q] = segment_->slot(b, q);
    if (root_reads_send) rows_[rank_] = send;
    ReduceRows(n, dtype, a.op, recv);
    return absl::OkStatus();
  }

  // Reduce-scatter then all-gather inside each chunk: rank q reduces segment
  // q of the chunk from every slot, publishes it in its own slot, and every
  // reader copies the segments out.
  const uint64_t chunk = segment_->slot_bytes() / element;
  if (scratch_.size() < segment_->slot_bytes()) scratch_.resize(segment_->slot_bytes());
  for (uint64_t off = 0; off < n; off += chunk) {
    const uint64_t count = std::min(chunk, n - off);
    const int b = NextBuffer();
    char* mine = segment_->slot(b, rank_);
    std::memcpy(mine, send + off * element, count * element);
    DIST_RETURN_IF_ERROR(Step(c));
    uint64_t begin = 0, len = 0;
    Segmentation(count, world_, element, rank_, &begin, &len);
    char* dest = reads ? recv + (off + begin) * element : scratch_.data();
    ReduceSlots(b, begin * element, len, dtype, a.op, dest);
    std::memcpy(mine + begin * element, dest, len * element);
    DIST_RETURN_IF_ERROR(Step(c));
    if (!reads) continue;
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      Segmentation(count, world_, element, q, &begin, &len);
      std::memcpy(recv + (off + begin) * element, segment_->slot(b, q) + begin * element,
                  len * element);
    }
  }
  return absl::OkStatus();
}

void Collectives::WriteForOthers(char* dst, const char* src, size_t bytes) const {
  if (bytes >= stream_from_bytes_) {
    CopyToShared(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

absl::Status Collectives::Broadcast(const dist_op_args_t& a, const OpContext& c) {
  const uint64_t n = a.recv.count;
  const size_t element = dist_dtype_size(a.recv.dtype);
  Begin(DIST_COLL_BROADCAST, a, a.recv.dtype, n);
  if (n == 0) return EmptyStep(c);
  if (n * element <= kEagerBytes) return EagerBroadcast(a, c);
  const bool root = a.root == rank_;
  if (root) DIST_RETURN_IF_ERROR(AwaitWritable(c));
  char* recv = Bytes(a.recv.data);
  const char* source = root && a.send.data != nullptr ? Bytes(a.send.data) : recv;
  if (root && source != recv) std::memcpy(recv, source, n * element);
  // One writer: the root streams through the whole half (all slots).
  const uint64_t chunk = segment_->slot_bytes() * world_ / element;
  if (n <= chunk) {  // one unit: one-sided (collectives.h)
    const int b = NextBuffer();
    if (root) {
      WriteForOthers(segment_->slot(b, 0), source, n * element);
      PublishUnit();
      return absl::OkStatus();
    }
    DIST_RETURN_IF_ERROR(StepFrom(a.root, c));
    std::memcpy(recv, segment_->slot(b, 0), n * element);
    return absl::OkStatus();
  }
  for (uint64_t off = 0; off < n; off += chunk) {
    const uint64_t count = std::min(chunk, n - off);
    const int b = NextBuffer();
    if (root) WriteForOthers(segment_->slot(b, 0), source + off * element, count * element);
    DIST_RETURN_IF_ERROR(Step(c));
    if (!root) std::memcpy(recv + off * element, segment_->slot(b, 0), count * element);
  }
  return absl::OkStatus();
}

// reader < 0: all_gather; else gather to reader.
absl::Status Collectives::AllGather(const dist_op_args_t& a, int reader, const OpContext& c) {
  const uint64_t n = a.send.count;
  const size_t element = dist_dtype_size(a.send.dtype);
  Begin(reader < 0 ? DIST_COLL_ALL_GATHER : DIST_COLL_GATHER, a, a.send.dtype, n);
  if (n == 0) return EmptyStep(c);
  if (reader >= 0 && n * element <= kEagerBytes) return EagerGather(a, /*reduce=*/false, c);
  DIST_RETURN_IF_ERROR(AwaitWritable(c));
  const bool reads = reader < 0 || reader == rank_;
  const char* send = Bytes(a.send.data);
  char* recv = reads ? Bytes(a.recv.data) : nullptr;
  const uint64_t chunk = segment_->slot_bytes() / element;
  for (uint64_t off = 0; off < n; off += chunk) {
    const uint64_t count = std::min(chunk, n - off);
    const int b = NextBuffer();
    std::memcpy(segment_->slot(b, rank_), send + off * element, count * element);
    if (!reads && n <= chunk) {  // gather of one unit: one-sided (collectives.h)
      PublishUnit();
      return absl::OkStatus();
    }
    if (reads) {
      // The own block straight from send, while the others catch up: the
      // slot is only for them. In place, send is that block already.
      char* own = recv + (rank_ * n + off) * element;
      const char* from = send + off * element;
      if (own != from) std::memmove(own, from, count * element);
    }
    DIST_RETURN_IF_ERROR(Step(c));
    if (!reads) continue;
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      std::memcpy(recv + (q * n + off) * element, segment_->slot(b, q), count * element);
    }
  }
  return absl::OkStatus();
}

absl::Status Collectives::Scatter(const dist_op_args_t& a, const OpContext& c) {
  const uint64_t n = a.recv.count;
  const size_t element = dist_dtype_size(a.recv.dtype);
  Begin(DIST_COLL_SCATTER, a, a.recv.dtype, n);
  if (n == 0) return EmptyStep(c);
  if (n * element <= kEagerBytes) return EagerScatter(a, c);
  const bool root = a.root == rank_;
  if (root) DIST_RETURN_IF_ERROR(AwaitWritable(c));
  const char* send = root ? Bytes(a.send.data) : nullptr;
  char* recv = Bytes(a.recv.data);
  const uint64_t chunk = segment_->slot_bytes() / element;
  // One unit: one-sided (collectives.h). The root's own block never enters
  // the segment: it goes from send to recv (memmove: in place, the same
  // bytes), after the step when there are several, while the others copy
  // theirs out.
  const bool one_sided = n <= chunk;
  for (uint64_t off = 0; off < n; off += chunk) {
    const uint64_t count = std::min(chunk, n - off);
    const int b = NextBuffer();
    if (root) {
      for (int q = 0; q < world_; ++q) {
        if (q != rank_) {
          WriteForOthers(segment_->slot(b, q), send + (q * n + off) * element, count * element);
        }
      }
      if (one_sided) {
        std::memmove(recv, send + rank_ * n * element, n * element);
        PublishUnit();
        return absl::OkStatus();
      }
    }
    DIST_RETURN_IF_ERROR(one_sided ? StepFrom(a.root, c) : Step(c));
    const char* from = root ? send + (rank_ * n + off) * element : segment_->slot(b, rank_);
    std::memmove(recv + off * element, from, count * element);
  }
  return absl::OkStatus();
}

absl::Status Collectives::ReduceScatter(const dist_op_args_t& a, const OpContext& c) {
  const uint64_t n = a.recv.count;
  const dist_dtype_t dtype = a.recv.dtype;
  const size_t element = dist_dtype_size(dtype);
  Begin(DIST_COLL_REDUCE_SCATTER, a, dtype, n);
  if (n == 0) return EmptyStep(c);
  DIST_RETURN_IF_ERROR(AwaitWritable(c));
  const char* send = Bytes(a.send.data);
  char* recv = Bytes(a.recv.data);
  // Each slot holds this chunk of every block: [block 0 | block 1 | ...].
  const uint64_t chunk = segment_->slot_bytes() / (element * world_);
  for (uint64_t off = 0; off < n; off += chunk) {
    const uint64_t count = std::min(chunk, n - off);
    const int b = NextBuffer();
    char* mine = segment_->slot(b, rank_);
    for (int q = 0; q < world_; ++q) {
      std::memcpy(mine + q * count * element, send + (q * n + off) * element, count * element);
    }
    DIST_RETURN_IF_ERROR(Step(c));
    ReduceSlots(b, rank_ * count * element, count, dtype, a.op, recv + off * element);
  }
  return absl::OkStatus();
}

absl::Status Collectives::AllToAll(const dist_op_args_t& a, const OpContext& c) {
  const uint64_t n = a.send.count / world_;
  const size_t element = dist_dtype_size(a.send.dtype);
  Begin(DIST_COLL_ALL_TO_ALL, a, a.send.dtype, n);
  if (n == 0) return EmptyStep(c);
  DIST_RETURN_IF_ERROR(AwaitWritable(c));
  const char* send = Bytes(a.send.data);
  char* recv = Bytes(a.recv.data);
  const uint64_t chunk = segment_->slot_bytes() / (element * world_);
  for (uint64_t off = 0; off < n; off += chunk) {
    const uint64_t count = std::min(chunk, n - off);
    const int b = NextBuffer();
    char* mine = segment_->slot(b, rank_);
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;  // kept, not exchanged: copied straight across below
      WriteForOthers(mine + q * count * element, send + (q * n + off) * element, count * element);
    }
    DIST_RETURN_IF_ERROR(Step(c));
    for (int q = 0; q < world_; ++q) {
      char* to = recv + (q * n + off) * element;
      if (q == rank_) {
        // This rank's own block moves from send to recv at the same offset,
        // so in place it is already there; memmove for partial overlap.
        const char* from = send + (q * n + off) * element;
        if (from != to) std::memmove(to, from, count * element);
        continue;
      }
      std::memcpy(to, segment_->slot(b, q) + rank_ * count * element, count * element);
    }
  }
  return absl::OkStatus();
}

}  // namespace dist_shm

// The eager area (layout.h): rooted operations of one unit whose blocks
// fit a cell (kEagerBytes), one-sided, in the entry the unit's number picks
// (collectives.h).
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives.h"
#include "collectives_internal.h"
#include "dist/cpp/status.hpp"

namespace dist_shm {

void Collectives::WriteCell(EagerCell& cell, uint64_t unit, const void* data, uint64_t bytes) {
  std::memcpy(cell.data, data, bytes);
  cell.signature = segment_->rank(rank_).signature[(collectives_ - 1) % kSignatures];
  cell.seq.store(unit, std::memory_order_release);
}

void Collectives::EndEagerWrite() {
  Arrive(/*eager=*/true);
  check_signature_ = false;  // the readers compare, with the cells
  // Now: nothing later in this operation would wake the readers.
  waiter_->NotifyOthers();
}

absl::Status Collectives::AwaitCells(uint64_t unit, CellOf cell_of, int only, const OpContext& c) {
  Arrive(/*eager=*/true);
  check_signature_ = false;  // compared below, from the cells
  const int begin = only < 0 ? 0 : only;
  const int end = only < 0 ? world_ : only + 1;
  int first = begin;  // writers before it are known to be done
  uint32_t polls = 0;
  auto ready = [&]() {
    for (; first < end; ++first) {
      if (first == rank_ || cell_of(first).seq.load(std::memory_order_acquire) == unit) continue;
      // A writer that arrived without filling its cell called something
      // else (checked below). Its counter is read now and then only, so
      // that its line stays out of the way while it writes; always once
      // the spin is long over (a mismatch then costs no sleeps).
      if (((++polls & 63u) == 0 || polls > 100000) &&
          segment_->rank(first).arrived.load(std::memory_order_acquire) >= unit) {
        continue;
      }
      return false;
    }
    return true;
  };
  auto pending = [&](std::vector<int>* out) {
    for (int q = begin; q < end; ++q) {
      if (q != rank_ && cell_of(q).seq.load(std::memory_order_acquire) != unit &&
          segment_->rank(q).arrived.load(std::memory_order_acquire) < unit) {
        out->push_back(q);
      }
    }
  };
  const absl::Status waited = waiter_->Wait(ready, pending, c);
  waiter_->NotifyOthers();  // after the wait, as in StepFrom
  DIST_RETURN_IF_ERROR(waited);
  const OpSignature& mine = segment_->rank(rank_).signature[(collectives_ - 1) % kSignatures];
  for (int q = begin; q < end; ++q) {
    if (q == rank_) continue;
    const EagerCell& cell = cell_of(q);
    const bool filled = cell.seq.load(std::memory_order_acquire) == unit;
    if (filled && std::memcmp(&cell.signature, &mine, sizeof(mine)) == 0) continue;
    return absl::FailedPreconditionError(
        absl::StrCat("shm: ranks disagree on the collective: rank ", rank_, " called ",
                     Describe(mine), " but rank ", q,
                     filled ? absl::StrCat(" called ", Describe(cell.signature))
                            : std::string(" called another collective or count there"),
                     "; ", kRule, kOutOfStep));
  }
  return absl::OkStatus();
}

absl::Status Collectives::EagerBroadcast(const dist_op_args_t& a, const OpContext& c) {
  const uint64_t bytes = a.recv.count * dist_dtype_size(a.recv.dtype);
  const uint64_t unit = sequence_ + 1;
  const int entry = static_cast<int>(unit % segment_->eager_depth());
  NextBuffer();  // every unit takes its turn of the halves' parity
  if (a.root == rank_) {
    DIST_RETURN_IF_ERROR(AwaitEagerWritable(c));
    const void* source = a.send.data != nullptr ? a.send.data : a.recv.data;
    WriteCell(segment_->eager(entry, rank_), unit, source, bytes);
    EndEagerWrite();
    if (source != a.recv.data) std::memcpy(a.recv.data, source, bytes);
    return absl::OkStatus();
  }
  DIST_RETURN_IF_ERROR(AwaitCells(
      unit, [&](int q) -> const EagerCell& { return segment_->eager(entry, q); }, a.root, c));
  std::memcpy(a.recv.data, segment_->eager(entry, a.root).data, bytes);
  return absl::OkStatus();
}

absl::Status Collectives::EagerScatter(const dist_op_args_t& a, const OpContext& c) {
  const uint64_t bytes = a.recv.count * dist_dtype_size(a.recv.dtype);
  const uint64_t unit = sequence_ + 1;
  const int entry = static_cast<int>(unit % segment_->eager_depth());
  NextBuffer();
  if (a.root == rank_) {
    DIST_RETURN_IF_ERROR(AwaitEagerWritable(c));
    const char* send = Bytes(a.send.data);
    // The root writes every other rank's cell of the entry.
    for (int q = 0; q < world_; ++q) {
      if (q != rank_) WriteCell(segment_->eager(entry, q), unit, send + q * bytes, bytes);
    }
    EndEagerWrite();
    std::memmove(a.recv.data, send + rank_ * bytes, bytes);  // in place: the same bytes
    return absl::OkStatus();
  }
  EagerCell& mine = segment_->eager(entry, rank_);
  DIST_RETURN_IF_ERROR(AwaitCells(
      unit, [&](int) -> const EagerCell& { return mine; }, a.root, c));
  std::memcpy(a.recv.data, mine.data, bytes);
  return absl::OkStatus();
}

// reduce: false for gather.
absl::Status Collectives::EagerGather(const dist_op_args_t& a, bool reduce, const OpContext& c) {
  const uint64_t n = a.send.count;
  const uint64_t bytes = n * dist_dtype_size(a.send.dtype);
  const uint64_t unit = sequence_ + 1;
  const int entry = static_cast<int>(unit % segment_->eager_depth());
  NextBuffer();
  if (a.root != rank_) {
    DIST_RETURN_IF_ERROR(AwaitEagerWritable(c));
    WriteCell(segment_->eager(entry, rank_), unit, a.send.data, bytes);
    EndEagerWrite();
    return absl::OkStatus();
  }
  // The root's own block never goes through its cell. Reduce keeps a copy:
  // in place, the result overwrites it before the other rows are added.
  const char* own = Bytes(a.send.data);
  if (reduce && a.send.data == a.recv.data) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    std::memcpy(scratch_.data(), own, bytes);
    own = scratch_.data();
  }
  DIST_RETURN_IF_ERROR(AwaitCells(
      unit, [&](int q) -> const EagerCell& { return segment_->eager(entry, q); }, -1, c));
  if (reduce) {
    for (int q = 0; q < world_; ++q) rows_[q] = q == rank_ ? own : segment_->eager(entry, q).data;
    ReduceRows(n, a.send.dtype, a.op, a.recv.data);
    return absl::OkStatus();
  }
  char* recv = Bytes(a.recv.data);
  // In place the root's block is already where it belongs.
  if (own != recv + rank_ * bytes) std::memcpy(recv + rank_ * bytes, own, bytes);
  for (int q = 0; q < world_; ++q) {
    if (q != rank_) std::memcpy(recv + q * bytes, segment_->eager(entry, q).data, bytes);
  }
  return absl::OkStatus();
}

}  // namespace dist_shm

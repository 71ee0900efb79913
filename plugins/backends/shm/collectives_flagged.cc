// Flagged lines (layout.h): all-reduce of at most kFlaggedBytes, whose one
// unit's barrier is the arrival of every rank's data (collectives.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives.h"
#include "collectives_internal.h"
#include "dist/cpp/status.hpp"

namespace dist_shm {
namespace {

// Where a message's bytes go in flagged lines (layout.h): line `line` holds
// FlaggedRoom(line) bytes from FlaggedOffset(line) of the message, starting
// FlaggedSkip(line) bytes into the line (line 0 begins with the signature).
uint64_t FlaggedOffset(int line) {
  return line == 0 ? 0 : kFlaggedHeadBytes + (line - 1) * kFlaggedLineBytes;
}
uint64_t FlaggedRoom(int line) { return line == 0 ? kFlaggedHeadBytes : kFlaggedLineBytes; }
uint64_t FlaggedSkip(int line) { return line == 0 ? sizeof(OpSignature) : 0; }

// Flagged lines a message of `bytes` takes (at most kFlaggedLines).
int FlaggedLinesFor(uint64_t bytes) {
  if (bytes <= kFlaggedHeadBytes) return 1;
  return 1 +
         static_cast<int>((bytes - kFlaggedHeadBytes + kFlaggedLineBytes - 1) / kFlaggedLineBytes);
}

// Whether every one of the first `lines` lines carries `seq`. All are
// loaded, none skipped, so that their transfers overlap.
bool AllAt(const FlaggedLine* line, int lines, uint64_t seq) {
  bool all = true;
  for (int k = 0; k < lines; ++k) all &= line[k].seq.load(std::memory_order_acquire) == seq;
  return all;
}

}  // namespace

absl::Status Collectives::FlaggedAllReduce(const dist_op_args_t& a, const OpContext& c) {
  const dist_dtype_t dtype = a.send.dtype;
  const uint64_t n = a.send.count;
  const uint64_t bytes = n * dist_dtype_size(dtype);
  const int lines = FlaggedLinesFor(bytes);
  const int b = NextBuffer();
  const uint64_t seq = sequence_ + 1;  // Arrive's, below
  RankControl& own = segment_->rank(rank_);
  const OpSignature& mine = own.signature[(collectives_ - 1) % kSignatures];
  // Every line's bytes, then its number: a reader that sees the number has
  // the bytes (release/acquire on the same line).
  FlaggedLine* out = own.flagged[b];
  std::memcpy(out[0].bytes, &mine, sizeof(mine));
  for (int k = 0; k < lines; ++k) {
    std::memcpy(out[k].bytes + FlaggedSkip(k), Bytes(a.send.data) + FlaggedOffset(k),
                std::min(bytes - FlaggedOffset(k), FlaggedRoom(k)));
  }
  for (int k = 0; k < lines; ++k) out[k].seq.store(seq, std::memory_order_release);
  // A rank on another path (it issued another collective: a mismatch)
  // waits for `arrived`, and failure reports name ranks by it.
  Arrive();
  check_signature_ = false;  // compared below, from the lines

  int first = 0;  // ranks before it are known to be ready
  uint32_t polls = 0;
  auto ready = [&]() {
    for (; first < world_; ++first) {
      const FlaggedLine* theirs = segment_->rank(first).flagged[b];
      if (AllAt(theirs, lines, seq)) continue;
      // It arrived, but its lines may never all come: it wrote fewer
      // (another count) or none (another collective, seen by `arrived`,
      // checked now and then so that its line stays out of the way). Once
      // every rank arrived, CheckFlagged names the mismatch.
      if (theirs[0].seq.load(std::memory_order_acquire) == seq) {
        if (std::memcmp(theirs[0].bytes, &mine, sizeof(mine)) != 0) continue;
      } else if ((++polls & 63u) == 0 &&
                 segment_->rank(first).arrived.load(std::memory_order_acquire) >= seq) {
        continue;
      }
      return false;
    }
    return true;
  };
  auto pending = [&](std::vector<int>* out_ranks) {
    for (int q = 0; q < world_; ++q) {
      if (segment_->rank(q).flagged[b][0].seq.load(std::memory_order_acquire) != seq &&
          segment_->rank(q).arrived.load(std::memory_order_acquire) < seq) {
        out_ranks->push_back(q);
      }
    }
  };
  const absl::Status waited = waiter_->Wait(ready, pending, c);
  waiter_->NotifyOthers();  // after the wait, as in Step
  DIST_RETURN_IF_ERROR(waited);
  DIST_RETURN_IF_ERROR(CheckFlagged(b, seq, lines));
  // Every rank wrote this unit, so had read the one before.
  all_arrived_ = std::max(all_arrived_, seq);
  // Line 0 alone holds a message of up to 40 bytes contiguously; longer
  // ones are gathered. Own data from own lines: with send == recv (in
  // place) the send buffer is overwritten while others are still reduced.
  if (lines == 1) {
    for (int q = 0; q < world_; ++q)
      rows_[q] = segment_->rank(q).flagged[b][0].bytes + FlaggedSkip(0);
  } else {
    if (scratch_.size() < world_ * bytes) scratch_.resize(world_ * bytes);
    for (int q = 0; q < world_; ++q) {
      const FlaggedLine* in = segment_->rank(q).flagged[b];
      char* row = scratch_.data() + q * bytes;
      for (int k = 0; k < lines; ++k) {
        std::memcpy(row + FlaggedOffset(k), in[k].bytes + FlaggedSkip(k),
                    std::min(bytes - FlaggedOffset(k), FlaggedRoom(k)));
      }
      rows_[q] = row;
    }
  }
  ReduceRows(n, dtype, a.op, a.recv.data);
  return absl::OkStatus();
}

absl::Status Collectives::CheckFlagged(int buffer, uint64_t seq, int lines) const {
  const OpSignature& mine = segment_->rank(rank_).signature[(collectives_ - 1) % kSignatures];
  for (int q = 0; q < world_; ++q) {
    const FlaggedLine* theirs = segment_->rank(q).flagged[buffer];
    if (AllAt(theirs, lines, seq) && std::memcmp(theirs[0].bytes, &mine, sizeof(mine)) == 0) {
      continue;
    }
    // Every rank published its signature before arriving.
    DIST_RETURN_IF_ERROR(CompareSignatures(collectives_ - 1, seq, -1));
    return absl::InternalError(absl::StrCat("shm: rank ", q, " reached unit ", seq,
                                            " of the same collective without its data"));
  }
  return absl::OkStatus();
}

}  // namespace dist_shm

// Collectives::Run and what every data path shares: operation signatures
// and their comparison, units and barriers (the eager area's rule for
// writers, AwaitEagerWritable, among them), the reduction of rows. The
// paths: collectives_slots.cc (the staging slots; each collective there
// first picks its path), collectives_eager.cc (the eager area),
// collectives_flagged.cc (flagged lines).
#include "collectives.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives_internal.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "dist/cpp/validate.hpp"

namespace dist_shm {

void Collectives::Begin(dist_collective_t collective, const dist_op_args_t& a, dist_dtype_t dtype,
                        uint64_t count) {
  OpSignature s{};
  s.collective = static_cast<uint8_t>(collective);
  s.dtype = static_cast<uint8_t>(dtype);
  s.count = count;
  s.root = dist::IsRooted(collective) ? a.root : -1;
  s.op = static_cast<uint8_t>(dist::IsReducing(collective) ? a.op : 0);
  segment_->rank(rank_).signature[collectives_ % kSignatures] = s;
  ++collectives_;
  check_signature_ = true;
}

bool Collectives::ReturnsWithoutWaiting(const OpSignature& s, int q) const {
  const uint64_t bytes = s.count * dist_dtype_size(static_cast<dist_dtype_t>(s.dtype));
  if (bytes == 0) return false;
  const uint64_t slot = segment_->slot_bytes();
  switch (s.collective) {
    case DIST_COLL_BROADCAST:
      return q == s.root && bytes <= slot * world_;
    case DIST_COLL_SCATTER:
      return q == s.root && bytes <= slot;
    case DIST_COLL_GATHER:
      return q != s.root && bytes <= slot;
    case DIST_COLL_REDUCE:  // eager (kEagerBytes < kMinSlotBytes) or one slot
      return q != s.root && bytes <= OneUnitReduceBytes(s.root, world_, slot);
    default:
      return false;
  }
}

absl::Status Collectives::CompareSignatures(uint64_t collective, uint64_t unit, int only) const {
  const size_t at = collective % kSignatures;
  auto signature = [&](int q) -> const OpSignature& { return segment_->rank(q).signature[at]; };
  for (int q = 0; q < world_; ++q) {
    if (only >= 0 && q != only) continue;
    // A peer that called the same collective is at most two units further
    // (AwaitEagerWritable), so its signature is still kept; one further on
    // did not wait at this unit: it called something else.
    if (segment_->rank(q).arrived.load(std::memory_order_acquire) > unit + 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shm: ranks disagree on the collective: rank ", rank_, " called ",
          Describe(signature(rank_)), " but rank ", q,
          " went on past it (it called small rooted operations there); ", kRule, kOutOfStep));
    }
    if (std::memcmp(&signature(rank_), &signature(q), sizeof(OpSignature)) == 0) continue;
    // Named against rank 0 when all were compared, else against this rank.
    int one = 0;
    int other = q == 0 ? rank_ : q;
    if (only >= 0) {
      one = rank_;
      other = q;
    }
    const std::string message = absl::StrCat(
        "shm: ranks disagree on the collective: rank ", one, " called ", Describe(signature(one)),
        " but rank ", other, " called ", Describe(signature(other)), "; ", kRule);
    if (ReturnsWithoutWaiting(signature(q), q)) {
      return absl::FailedPreconditionError(absl::StrCat(message, kOutOfStep));
    }
    return absl::InvalidArgumentError(message);
  }
  return absl::OkStatus();
}

absl::Status Collectives::Await(uint64_t seq, int only, const OpContext& c) {
  if (all_arrived_ >= seq) return absl::OkStatus();
  const int begin = only < 0 ? 0 : only;
  const int end = only < 0 ? world_ : only + 1;
  int first = begin;  // ranks before it are known to have arrived
  // The least unit those ranks were seen at: a root that runs ahead waits
  // for a unit its readers passed long ago, and remembering how far they
  // were spares it a load of each reader's line (written by that reader at
  // every call, so a cross-core miss both ways) at the next calls.
  uint64_t least = ~uint64_t{0};
  auto ready = [&]() {
    while (first < end) {
      const uint64_t at = segment_->rank(first).arrived.load(std::memory_order_acquire);
      if (at < seq) return false;
      least = std::min(least, at);
      ++first;
    }
    return true;
  };
  auto pending = [&](std::vector<int>* out) {
    for (int q = begin; q < end; ++q) {
      if (segment_->rank(q).arrived.load(std::memory_order_acquire) < seq) out->push_back(q);
    }
  };
  absl::Status status = waiter_->Wait(ready, pending, c);
  if (status.ok() && only < 0) all_arrived_ = least;  // >= seq
  return status;
}

absl::Status Collectives::StepFrom(int from, const OpContext& c) {
  absl::Status status = Await(Arrive(), from, c);
  // Wake the peers that sleep waiting for this rank only now. A peer that
  // waits for this rank has arrived itself (at this unit, or past it for a
  // writer's AwaitWritable), so this wait, which at most waits for it too,
  // did not need it awake; and NotifyOthers' fence, which waits for this
  // rank's stores to reach the peers, costs nothing now instead of a
  // cross-core round trip before the wait. (A notice lost on a failed wait
  // costs a sleeper at most one slice: Waiter::Wait sleeps in slices.)
  waiter_->NotifyOthers();
  if (status.ok() && check_signature_) {
    check_signature_ = false;
    status = CompareSignatures(collectives_ - 1, sequence_, from);
  }
  return status;
}

absl::Status Collectives::CheckPublished(const OpContext& c) {
  if (!published_) return absl::OkStatus();
  published_ = false;
  DIST_RETURN_IF_ERROR(AwaitAll(sequence_, c));
  const absl::Status status = CompareSignatures(collectives_ - 1, sequence_, -1);
  if (status.ok()) return status;
  // Not InvalidArgument: the peers failed that collective, this rank went
  // on, so the communicator cannot recover (Communicator::NoteFailure).
  return absl::FailedPreconditionError(absl::StrCat(
      status.message(),
      ". Found at the next operation: this rank had returned from that collective without "
      "waiting for its peers (it only wrote), so it is out of step with them; destroy this "
      "communicator and create a new one"));
}

absl::Status Collectives::AwaitEagerWritable(const OpContext& c) {
  const uint64_t unit = sequence_ + 1;
  // The entry's last unit, unit - depth, has been read by everyone once
  // every rank reached the unit after it.
  const uint64_t depth = static_cast<uint64_t>(segment_->eager_depth());
  uint64_t need = unit > depth ? unit - depth + 1 : 0;
  // And a peer compares this rank's signature of its last collective of
  // another kind (a barrier) when it arrives there; it must still be in
  // this rank's history (kSignatures), so from the second unit after that
  // one on, wait until everyone went past it. In a loop of broadcasts this
  // holds already, so the root runs up to depth - 1 calls ahead.
  need = std::max(need, last_other_ + 1);
  // The usual rule (AwaitWritable) is the most ever needed.
  return AwaitAll(std::min(need, unit - 1), c);
}

void Collectives::ReduceRows(uint64_t len, dist_dtype_t dtype, dist_reduce_op_t op, void* dest) {
  if (len == 0) return;
  const size_t element = dist_dtype_size(dtype);
  if (dtype == DIST_FLOAT16 || dtype == DIST_BFLOAT16) {
    // Accumulate in float and round once at the end.
    constexpr uint64_t kBlock = 1024;
    float acc[kBlock];
    float in[kBlock];
    for (uint64_t done = 0; done < len; done += kBlock) {
      const uint64_t n = std::min(kBlock, len - done);
      const uint64_t at = done * element;
      dist::WidenToFloat(dtype, rows_[0] + at, acc, n);
      for (int q = 1; q < world_; ++q) {
        dist::WidenToFloat(dtype, rows_[q] + at, in, n);
        dist::ReduceInto(DIST_FLOAT32, op, acc, in, n);
      }
      if (op == DIST_AVG) dist::FinishAverage(DIST_FLOAT32, acc, n, world_);
      dist::NarrowFromFloat(dtype, acc, Bytes(dest) + done * element, n);
    }
    return;
  }
  if (dest != rows_[0]) std::memcpy(dest, rows_[0], len * element);  // in place on rank 0
  for (int q = 1; q < world_; ++q) dist::ReduceInto(dtype, op, dest, rows_[q], len);
  if (op == DIST_AVG) dist::FinishAverage(dtype, dest, len, world_);
}

absl::Status Collectives::Run(dist_collective_t collective, const dist_op_args_t& a,
                              const OpContext& c) {
  DIST_RETURN_IF_ERROR(CheckPublished(c));
  switch (collective) {
    case DIST_COLL_ALL_REDUCE:
      return AllReduce(a, -1, c);
    case DIST_COLL_REDUCE:
      return AllReduce(a, a.root, c);
    case DIST_COLL_BROADCAST:
      return Broadcast(a, c);
    case DIST_COLL_ALL_GATHER:
      return AllGather(a, -1, c);
    case DIST_COLL_GATHER:
      return AllGather(a, a.root, c);
    case DIST_COLL_SCATTER:
      return Scatter(a, c);
    case DIST_COLL_REDUCE_SCATTER:
      return ReduceScatter(a, c);
    case DIST_COLL_ALL_TO_ALL:
      return AllToAll(a, c);
    case DIST_COLL_BARRIER:
      Begin(collective, a, DIST_INT8, 0);
      return EmptyStep(c);
    default:
      return absl::InternalError(
          absl::StrCat("shm: ", dist_collective_name(collective), " is not a collective"));
  }
}

}  // namespace dist_shm

#include "collectives.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "dist/cpp/validate.hpp"
#include "stream_copy.h"

namespace dist_shm {
namespace {

// Messages up to this size take the one-barrier all_reduce: every rank reads
// all slots and reduces the whole message itself (latency beats bandwidth).
constexpr uint64_t kSmallReduceBytes = 16 * 1024;

// The most bytes an AllReduce call (a reduce to `reader` when >= 0) takes in
// one unit through the slots. A reduce on two ranks: up to a slot, one-sided
// (collectives.h): the other rank copies its data into its slot and
// returns, running one unit ahead, and the root reduces. 2 ranks, against
// the two-step path, 3 alternated runs: 64 KiB 10.2-10.5 us against
// 13.4-45.6, 256 KiB 24.7-27.0 against 30.8-33.0. On more ranks the root
// alone would read every slot: 4 ranks, 256 KiB took 71-179 us against 52-54.
uint64_t OneUnitReduceBytes(int reader, int world, uint64_t slot) {
  return reader >= 0 && world == 2 ? slot : std::min(kSmallReduceBytes, slot);
}

char* Bytes(void* p) { return static_cast<char*>(p); }

constexpr char kRule[] =
    "every rank must issue the same collectives in the same order with the same counts, "
    "dtypes, ops and roots";
// After a mismatch with a rank that did not wait, it went on as if the
// collective had matched: the communicator cannot recover, so the error is
// not INVALID_ARGUMENT (Communicator::NoteFailure).
constexpr char kOutOfStep[] =
    ". That rank returned without waiting (a small rooted operation is one-sided), so this "
    "communicator is out of step: destroy it and create a new one";

std::string Describe(const OpSignature& s) {
  const auto collective = static_cast<dist_collective_t>(s.collective);
  std::string text = absl::StrCat(dist_collective_name(collective), "(count=", s.count, ", ",
                                  dist_dtype_name(static_cast<dist_dtype_t>(s.dtype)));
  if (dist::IsReducing(collective)) {
    absl::StrAppend(&text, ", op=", dist_reduce_op_name(static_cast<dist_reduce_op_t>(s.op)));
  }
  if (dist::IsRooted(collective)) absl::StrAppend(&text, ", root=", s.root);
  return text + ")";
}

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

uint64_t Collectives::Arrive(bool eager) {
  const uint64_t seq = ++sequence_;
  segment_->rank(rank_).arrived.store(seq, std::memory_order_release);
  if (!eager) last_other_ = seq;
  return seq;
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

void Collectives::PublishUnit() {
  Arrive();
  // Now: nothing later in this operation would wake the readers.
  waiter_->NotifyOthers();
  check_signature_ = false;
  published_ = true;
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

absl::Status Collectives::EmptyStep(const OpContext& c) {
  // Every collective uses one unit before its first barrier, data or not:
  // after a mismatch (found at that barrier) all ranks still agree on the
  // double-buffer parity.
  NextBuffer();
  return Step(c);
}

void Collectives::ReduceSlots(int buffer, uint64_t offset, uint64_t len, dist_dtype_t dtype,
                              dist_reduce_op_t op, void* dest) {
  for (int q = 0; q < world_; ++q) rows_[q] = segment_->slot(buffer, q) + offset;
  ReduceRows(len, dtype, op, dest);
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

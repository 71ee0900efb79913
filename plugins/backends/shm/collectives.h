// The collectives over a segment's staging slots.
//
// Every collective is a sequence of units: write into this rank's slot (or,
// for the root of broadcast/scatter, into the slots it owns for the unit),
// meet at a barrier, read what the unit needs from the others' slots. Units
// alternate between the two halves of the double buffer, so a unit's writes
// never clobber a slot a slower rank still reads: to write half b again a
// rank must pass the barrier of the unit in between, which nobody reaches
// before finishing its reads of half b. Large messages stream through in
// slot-sized chunks, so the segment never needs to be as large as a message.
//
// All-reduce and reduce of up to 40 bytes skip the slots: each rank writes
// its data into a flagged cache line (layout.h), so a peer's one transfer of
// the line brings the data with the news that it is there, and the unit's
// barrier is the arrival of every rank's line.
//
// The rooted operations of one unit (broadcast, scatter, gather and reduce
// of a message that fits the slots once) are one-sided, as Open MPI's eager
// sends: a rank that only writes (the root of broadcast and scatter, the
// others in gather and reduce) publishes its data and returns, and the
// ranks that read wait only for the ranks they read. What keeps a writer
// from overwriting data still read is one rule: before writing, wait until
// every rank reached the unit after the last one that used the same memory,
// so finished reading it. Blocks of at most kEagerBytes go through the eager
// area (layout.h), whose entry is picked by the unit's number, so a writer
// there may run up to the eager depth - 1 units ahead of its slowest reader; in
// the slots, which alternate between two halves, one unit. A reader checks
// the writer's signature as it reads (an eager cell carries it); a writer
// that returned from the slots early compares its peers' at its next
// operation (kSignatures in layout.h). A mismatch with a rank that did not
// wait fails with FAILED_PRECONDITION and fails the communicator, since that
// rank went on as if the call had matched; its peers then fail too.
//
// Files: collectives.cc (Run, signatures, units and barriers),
// collectives_slots.cc, collectives_eager.cc and collectives_flagged.cc (the
// three paths), collectives_internal.h (what they share; inline there: the
// members declared inline below).
#ifndef DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_H_
#define DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "dist/backend_plugin.h"
#include "segment.h"
#include "waiter.h"

namespace dist_shm {

class Collectives {
 public:
  // stream_from_bytes: Tuning::stream_from_bytes.
  Collectives(Segment* segment, Waiter* waiter, int rank, uint64_t stream_from_bytes)
      : segment_(segment),
        waiter_(waiter),
        rank_(rank),
        world_(segment->world_size()),
        stream_from_bytes_(stream_from_bytes),
        rows_(static_cast<size_t>(world_)) {}

  // `args` has been validated (shapes, dtypes, devices, root) by the caller.
  absl::Status Run(dist_collective_t collective, const dist_op_args_t& args,
                   const OpContext& context);

 private:
  absl::Status AllReduce(const dist_op_args_t& a, int reader, const OpContext& c);
  // All-reduce of at most kFlaggedBytes, through flagged lines: one unit,
  // whose barrier is the arrival of every rank's data.
  absl::Status FlaggedAllReduce(const dist_op_args_t& a, const OpContext& c);
  // After FlaggedAllReduce's wait: OK when every rank wrote its lines for
  // unit `seq` with this rank's signature, else the mismatch.
  absl::Status CheckFlagged(int buffer, uint64_t seq, int lines) const;
  absl::Status Broadcast(const dist_op_args_t& a, const OpContext& c);
  absl::Status AllGather(const dist_op_args_t& a, int reader, const OpContext& c);
  absl::Status Scatter(const dist_op_args_t& a, const OpContext& c);
  absl::Status ReduceScatter(const dist_op_args_t& a, const OpContext& c);
  absl::Status AllToAll(const dist_op_args_t& a, const OpContext& c);

  // Rooted operations of one eager unit (every block at most kEagerBytes):
  // through the entry of the eager area the unit's number picks (layout.h).
  absl::Status EagerBroadcast(const dist_op_args_t& a, const OpContext& c);
  absl::Status EagerScatter(const dist_op_args_t& a, const OpContext& c);
  absl::Status EagerGather(const dist_op_args_t& a, bool reduce, const OpContext& c);
  // Before writing cells for the next unit: the eager form of AwaitWritable.
  absl::Status AwaitEagerWritable(const OpContext& c);
  // Fills `cell` for `unit` with `bytes` of `data` and this rank's signature.
  void WriteCell(EagerCell& cell, uint64_t unit, const void* data, uint64_t bytes);
  // A writer's end of an eager unit: arrive, wake the readers.
  void EndEagerWrite();
  // A reader's step of an eager unit: arrive, then wait until the cell of
  // `only` (every other rank if negative), cell_of(q), holds `unit`, and
  // check the writers' signatures. FAILED_PRECONDITION on a mismatch.
  using CellOf = absl::FunctionRef<const EagerCell&(int)>;
  absl::Status AwaitCells(uint64_t unit, CellOf cell_of, int only, const OpContext& c);

  // Announces the operation; the next Step compares it across ranks.
  void Begin(dist_collective_t collective, const dist_op_args_t& a, dist_dtype_t dtype,
             uint64_t count);
  // Publishes this rank's arrival at the next unit; returns its number.
  inline uint64_t Arrive(bool eager = false);
  // Waits until every rank arrived at unit `seq`.
  absl::Status AwaitAll(uint64_t seq, const OpContext& c) { return Await(seq, -1, c); }
  // Waits until rank `only` (every rank if negative) arrived at unit `seq`.
  absl::Status Await(uint64_t seq, int only, const OpContext& c);
  // Waits until every rank arrived at the last unit this rank arrived at:
  // call before writing a unit's data (the one-sided rule above).
  absl::Status AwaitWritable(const OpContext& c) { return AwaitAll(sequence_, c); }
  // One barrier across all ranks: arrive, wait for every rank, compare.
  absl::Status Step(const OpContext& c) { return StepFrom(-1, c); }
  // Arrive, then wait for `from` alone (every rank if negative) and compare
  // this collective's signature with the ranks waited for.
  absl::Status StepFrom(int from, const OpContext& c);
  // A writer's whole step in a one-sided unit: arrive, wake the readers,
  // and leave this collective's signatures to the next operation.
  void PublishUnit();
  // At the start of an operation: the signatures a PublishUnit left.
  absl::Status CheckPublished(const OpContext& c);
  // The first (and only) barrier of an operation without data.
  inline absl::Status EmptyStep(const OpContext& c);
  // OK when rank `only` (every rank if negative) issued collective number
  // `collective`, whose unit `unit` all compared ranks reached, as this
  // rank did.
  absl::Status CompareSignatures(uint64_t collective, uint64_t unit, int only) const;
  // Whether rank q, calling `s`, only writes its part of a one-unit rooted
  // operation and returns without waiting.
  bool ReturnsWithoutWaiting(const OpSignature& s, int q) const;
  int NextBuffer() { return static_cast<int>(units_++ & 1u); }

  // dest[0..len) = reduction over every rank q (in rank order, so all ranks
  // compute bit-identical results) of slot(buffer, q) + offset.
  void ReduceSlots(int buffer, uint64_t offset_bytes, uint64_t len, dist_dtype_t dtype,
                   dist_reduce_op_t op, void* dest);
  // The same over rows_[q] (len elements each).
  void ReduceRows(uint64_t len, dist_dtype_t dtype, dist_reduce_op_t op, void* dest);

  // A block written into the segment for other ranks to read: with
  // non-temporal stores from stream_from_bytes_ on (stream_copy.h), else
  // memcpy.
  void WriteForOthers(char* dst, const char* src, size_t bytes) const;

  Segment* segment_;
  Waiter* waiter_;
  int rank_;
  int world_;
  uint64_t stream_from_bytes_;
  uint64_t sequence_ = 0;     // units arrived at
  uint64_t all_arrived_ = 0;  // units every rank is known to have arrived at
  uint64_t last_other_ = 0;   // the last unit this rank arrived at that was not eager
  uint64_t units_ = 0;        // staging units used (double-buffer parity)
  uint64_t collectives_ = 0;  // collectives begun (signature index)
  bool check_signature_ = false;
  bool published_ = false;  // the last collective ended in PublishUnit, unchecked
  std::vector<char> scratch_;
  std::vector<const char*> rows_;  // one per rank: ReduceRows' inputs
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_H_

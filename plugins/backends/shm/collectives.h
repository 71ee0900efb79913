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
// All-reduce and reduce of up to 32 bytes skip the slots: each rank writes
// its data into a flagged cache line (layout.h), so a peer's one transfer of
// the line brings the data with the news that it is there, and the unit's
// barrier is the arrival of every rank's line.
#ifndef DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_H_
#define DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "dist/backend_plugin.h"
#include "segment.h"
#include "waiter.h"

namespace dist_shm {

class Collectives {
 public:
  Collectives(Segment* segment, Waiter* waiter, int rank)
      : segment_(segment),
        waiter_(waiter),
        rank_(rank),
        world_(segment->world_size()),
        rows_(static_cast<size_t>(world_)) {}

  // `args` has been validated (shapes, dtypes, devices, root) by the caller.
  absl::Status Run(dist_collective_t collective, const dist_op_args_t& args,
                   const OpContext& context);

 private:
  absl::Status AllReduce(const dist_op_args_t& a, int reader, const OpContext& c);
  // All-reduce or reduce of at most kFlaggedBytes, through flagged lines:
  // one unit, whose barrier is the arrival of every rank's data.
  absl::Status FlaggedAllReduce(const dist_op_args_t& a, bool reads, const OpContext& c);
  // After FlaggedAllReduce's wait: OK when every rank wrote its lines for
  // unit `seq` with this rank's signature, else the mismatch.
  absl::Status CheckFlagged(int buffer, uint64_t seq, int lines) const;
  absl::Status Broadcast(const dist_op_args_t& a, const OpContext& c);
  absl::Status AllGather(const dist_op_args_t& a, int reader, const OpContext& c);
  absl::Status Scatter(const dist_op_args_t& a, const OpContext& c);
  absl::Status ReduceScatter(const dist_op_args_t& a, const OpContext& c);
  absl::Status AllToAll(const dist_op_args_t& a, const OpContext& c);

  // Announces the operation; the next Step compares it across ranks.
  void Begin(dist_collective_t collective, const dist_op_args_t& a, dist_dtype_t dtype,
             uint64_t count);
  // One barrier across all ranks.
  absl::Status Step(const OpContext& c);
  // The first (and only) barrier of an operation without data.
  absl::Status EmptyStep(const OpContext& c);
  absl::Status CompareSignatures() const;
  int NextBuffer() { return static_cast<int>(units_++ & 1u); }

  // dest[0..len) = reduction over every rank q (in rank order, so all ranks
  // compute bit-identical results) of slot(buffer, q) + offset.
  void ReduceSlots(int buffer, uint64_t offset_bytes, uint64_t len, dist_dtype_t dtype,
                   dist_reduce_op_t op, void* dest);
  // The same over rows_[q] (len elements each).
  void ReduceRows(uint64_t len, dist_dtype_t dtype, dist_reduce_op_t op, void* dest);

  Segment* segment_;
  Waiter* waiter_;
  int rank_;
  int world_;
  uint64_t sequence_ = 0;     // barriers passed
  uint64_t units_ = 0;        // staging units used (double-buffer parity)
  uint64_t collectives_ = 0;  // collectives begun (signature parity)
  bool check_signature_ = false;
  std::vector<char> scratch_;
  std::vector<const char*> rows_;  // one per rank: ReduceRows' inputs
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_H_

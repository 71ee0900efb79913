// Private to collectives*.cc: what more than one of them uses. The members
// defined here (declared inline in collectives.h) are called from several
// of those files and were inlined when they were one file (Arrive on every
// path's hot path, EmptyStep in every barrier), so they stay inline.
#ifndef DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_INTERNAL_H_
#define DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "collectives.h"
#include "dist/cpp/validate.hpp"
#include "layout.h"

namespace dist_shm {

// Messages up to this size take the one-barrier all_reduce: every rank reads
// all slots and reduces the whole message itself (latency beats bandwidth).
inline constexpr uint64_t kSmallReduceBytes = 16 * 1024;

// The most bytes an AllReduce call (a reduce to `reader` when >= 0) takes in
// one unit through the slots. A reduce on two ranks: up to a slot, one-sided
// (collectives.h): the other rank copies its data into its slot and
// returns, running one unit ahead, and the root reduces. 2 ranks, against
// the two-step path, 3 alternated runs: 64 KiB 10.2-10.5 us against
// 13.4-45.6, 256 KiB 24.7-27.0 against 30.8-33.0. On more ranks the root
// alone would read every slot: 4 ranks, 256 KiB took 71-179 us against 52-54.
inline uint64_t OneUnitReduceBytes(int reader, int world, uint64_t slot) {
  return reader >= 0 && world == 2 ? slot : std::min(kSmallReduceBytes, slot);
}

inline char* Bytes(void* p) { return static_cast<char*>(p); }

inline constexpr char kRule[] =
    "every rank must issue the same collectives in the same order with the same counts, "
    "dtypes, ops and roots";
// After a mismatch with a rank that did not wait, it went on as if the
// collective had matched: the communicator cannot recover, so the error is
// not INVALID_ARGUMENT (Communicator::NoteFailure).
inline constexpr char kOutOfStep[] =
    ". That rank returned without waiting (a small rooted operation is one-sided), so this "
    "communicator is out of step: destroy it and create a new one";

inline std::string Describe(const OpSignature& s) {
  const auto collective = static_cast<dist_collective_t>(s.collective);
  std::string text = absl::StrCat(dist_collective_name(collective), "(count=", s.count, ", ",
                                  dist_dtype_name(static_cast<dist_dtype_t>(s.dtype)));
  if (dist::IsReducing(collective)) {
    absl::StrAppend(&text, ", op=", dist_reduce_op_name(static_cast<dist_reduce_op_t>(s.op)));
  }
  if (dist::IsRooted(collective)) absl::StrAppend(&text, ", root=", s.root);
  return text + ")";
}

inline uint64_t Collectives::Arrive(bool eager) {
  const uint64_t seq = ++sequence_;
  segment_->rank(rank_).arrived.store(seq, std::memory_order_release);
  if (!eager) last_other_ = seq;
  return seq;
}

inline absl::Status Collectives::EmptyStep(const OpContext& c) {
  // Every collective uses one unit before its first barrier, data or not:
  // after a mismatch (found at that barrier) all ranks still agree on the
  // double-buffer parity.
  NextBuffer();
  return Step(c);
}

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_COLLECTIVES_INTERNAL_H_

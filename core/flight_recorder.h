// The flight recorder: per process group, a ring of the last N operations
// (DIST_TRACE_ENTRIES, default 2000, 0 = off), written as JSON when an
// operation fails or times out, when the group aborts, or on demand
// (dist_trace_dump). `disttrace DIR` reads the dumps of every rank.
//
// Recording is a few stores into a preallocated slot under that slot's own
// lock, with a time-stamp counter reading for the times (trace_clock.h):
// cheap enough to stay on for every call (docs/performance.md, "The flight
// recorder and DIST_DEBUG", has the measurement).
#ifndef DIST_CORE_FLIGHT_RECORDER_H_
#define DIST_CORE_FLIGHT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/trace_clock.h"
#include "dist/backend_plugin.h"
#include "dist/types.h"
#include "nlohmann/json_fwd.hpp"

namespace dist {

// What one rank called: the part of an operation that must agree across
// ranks (DIST_DEBUG=detail compares it; disttrace compares the dumps).
struct OpFingerprint {
  dist_collective_t op = DIST_COLL_BARRIER;
  dist_dtype_t dtype = DIST_FLOAT32;
  uint64_t count = 0;
  dist_reduce_op_t reduce = DIST_SUM;  // meaningful for reducing operations only
  int32_t root = -1;                   // rooted operations; -1 otherwise
  int32_t peer = -1;                   // send/recv; -1 otherwise
  int64_t tag = 0;                     // send/recv
  dist_device_type_t device = DIST_DEVICE_CPU;
};

OpFingerprint MakeFingerprint(dist_collective_t kind, const dist_op_args_t& args,
                              dist_device_type_t device);

// "all_reduce(sum, 1024 x float32)", "broadcast(root 0, 2048 x float32)".
std::string DescribeOp(const OpFingerprint& fp);

bool IsPointToPoint(dist_collective_t kind);

enum class TraceState { kIssued, kStarted, kCompleted, kFailed, kTimedOut };
const char* TraceStateName(TraceState state);

class FlightRecorder {
 public:
  // `global_rank`: this process's rank in the default group (names the dump
  // file); `rank`: its rank in this group.
  // `dir`: DIST_TRACE_DIR, where failures dump (empty: they do not).
  FlightRecorder(std::string group, int32_t global_rank, int32_t rank, int32_t world_size,
                 std::string backend, size_t capacity, std::string dir);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ > 0; }

  // Records an operation entering the core; returns its id for the calls
  // below (ids of entries already overwritten are ignored there). `started`:
  // it goes to the backend right away (no Start call: one lock less).
  uint64_t Issue(uint64_t seq, const OpFingerprint& fp, bool started = false);
  void Start(uint64_t id);
  void End(uint64_t id, const absl::Status& status);

  // After a failure, timeout or abort: writes this rank's dump into the
  // trace directory, if there is one, and logs where (or why it could not).
  // The first 8 of a process are written, then at most one a second.
  void DumpAfterFailure(const std::string& reason) const;

  // dist_trace_dump: `path` empty means the trace directory.
  absl::StatusOr<std::string> Dump(const std::string& path, const std::string& reason) const {
    return DumpRank(global_rank_, dir_, path, reason);
  }

  // Writes every live recorder of `global_rank` (all its groups) as one JSON
  // file; `path` empty: DIR/rank-<global_rank>.json with DIR = `dir`.
  // Returns the path written.
  static absl::StatusOr<std::string> DumpRank(int32_t global_rank, const std::string& dir,
                                              const std::string& path, const std::string& reason);

 private:
  // Two threads meet on one entry only when a dump copies it or when the
  // ring wraps onto an operation still in flight, so each entry has its
  // own lock: one atomic exchange to take, a store to release (an
  // absl::Mutex costs a compare-exchange each way, 14 ns a pair here).
  struct Record {
    uint64_t id = 0;
    uint64_t seq = 0;
    OpFingerprint fp;
    uint64_t issued = 0, started = 0, ended = 0;  // TraceClock stamps; 0: not yet
    TraceState state = TraceState::kIssued;
    std::string error;
  };
  struct Entry {
    mutable std::atomic<bool> locked{false};  // taken by readers (dumps) too
    Record record;
  };
  class EntryLock;
  void ToJson(nlohmann::json& out) const;  // the group's object in the dump
  // The entry of operation `id`. The ring has a power of two entries (2,048
  // for the default 2,000) so that this is a mask, not a 64-bit division
  // (about 25 cycles, twice per call); dumps show the last capacity_.
  Entry& Slot(uint64_t id) const { return ring_[id & slot_mask_]; }

  const std::string group_;
  const int32_t global_rank_, rank_, world_size_;
  const std::string backend_;
  const size_t capacity_;
  const std::string dir_;
  const TraceClock clock_;
  const uint64_t slot_mask_;             // ring entries - 1
  const std::unique_ptr<Entry[]> ring_;  // slot_mask_ + 1 entries, each under its lock
  std::atomic<uint64_t> next_id_{1};     // 0: "not recorded"
};

}  // namespace dist

#endif  // DIST_CORE_FLIGHT_RECORDER_H_

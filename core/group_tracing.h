// What a process group does for diagnosis around each operation: numbers it,
// records it in the flight recorder (core/flight_recorder.h) and, under
// DIST_DEBUG=detail, checks it against the other ranks first
// (core/collective_check.h). Kept apart from ProcessGroup so that the
// operation path there stays a few calls.
#ifndef DIST_CORE_GROUP_TRACING_H_
#define DIST_CORE_GROUP_TRACING_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective_check.h"
#include "core/flight_recorder.h"
#include "dist/backend_plugin.h"
#include "dist/store.h"

namespace dist {

// From the configuration (DIST_DEBUG, DIST_TRACE_ENTRIES, DIST_TRACE_DIR);
// subgroups inherit their parent's.
struct TraceOptions {
  bool debug_detail = false;
  int64_t entries = 0;
  std::string dir;
};

// One operation on its way through the core.
struct TracedOp {
  uint64_t trace_id = 0;  // 0: not recorded
  uint64_t pairing = 0;   // send/recv under DIST_DEBUG=detail
  OpFingerprint fp;
};

class GroupTracing {
 public:
  // `check_store`: a store view private to this group's check (owned from
  // here on), or NULL when the check is off or this rank is not a member.
  GroupTracing(const TraceOptions& options, std::string group, int32_t global_rank, int32_t rank,
               int32_t world_size, std::string backends, dist_store_t* check_store,
               absl::Duration timeout);

  const TraceOptions& options() const { return options_; }
  const std::shared_ptr<FlightRecorder>& recorder() const { return recorder_; }

  // Before the backend: numbers and records the call, and checks it under
  // DIST_DEBUG=detail. On an error the call must not reach the backend; the
  // error is already recorded. `abort` runs when a rank is missing, so that
  // later calls fail at once instead of queueing behind it. Fills `op`
  // (in place: it is on every call's path).
  absl::Status Enter(const OpFingerprint& fp, absl::FunctionRef<void(const std::string&)> abort,
                     TracedOp* op);
  void Started(const TracedOp& op) {
    if (check_ != nullptr) recorder_->Start(op.trace_id);  // else Enter said so
  }
  // The operation failed before it got a work handle: records it, writes the
  // dump, and returns the status (for send/recv with what the peer posted).
  absl::Status Failed(const TracedOp& op, absl::Status status);
  // The status with what DIST_DEBUG=detail knows of the peer's side (send
  // and recv), for a failure the caller records itself.
  absl::Status Explain(const TracedOp& op, absl::Status status);

 private:
  const TraceOptions options_;
  std::shared_ptr<FlightRecorder> recorder_;  // shared with work handles
  std::unique_ptr<CollectiveCheck> check_;    // DIST_DEBUG=detail only
  std::atomic<uint64_t> collective_seq_{0};   // "#17": collectives issued on this group
  std::atomic<uint64_t> p2p_seq_{0};          // sends and receives issued
};

}  // namespace dist

#endif  // DIST_CORE_GROUP_TRACING_H_

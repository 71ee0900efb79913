// dist conformance kit: the suite's "abort" section.
// comm_abort fails pending and later operations.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::AbortCheck() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const std::string reason = "conformance kit aborts this communicator on purpose";
  Sync();
  absl::StatusOr<std::unique_ptr<Comm>> dup = comm_.Duplicate("abort", options_.op_timeout_ms);
  const dist_collective_t later =
      Declared(DIST_COLL_ALL_REDUCE) ? DIST_COLL_ALL_REDUCE : DIST_COLL_BARRIER;
  const bool with_pending = world >= 2 && Declared(DIST_COLL_RECV);
  const std::string pending_row = "abort: pending operation fails with ABORTED";
  const std::string later_row =
      absl::StrCat("abort: later ", dist_collective_name(later), " fails with ABORTED");
  const std::string destroy_row = "abort: comm_destroy of an aborted communicator returns";
  if (!dup.ok()) {
    // The same rows and the same synchronizations as below, so that the
    // ranks stay in step.
    const absl::Status why = Prefix(dup.status(), "creating the communicator to abort");
    Sync();
    if (with_pending) {
      Record(pending_row, "-", "-", "-", why);
      Sync();
    }
    if (Declared(later)) Record(later_row, dist_dtype_name(PreferredDtype()), "-", "16", why);
    Sync();
    Record(destroy_row, "-", "-", "-", why);
    return;
  }
  Comm& c = **dup;
  // Every rank has finished creating it before anyone aborts it (a rank
  // still connecting would see its peer hang up instead).
  Sync();
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  auto aborted = [&](const absl::Status& status, const std::string& what) -> absl::Status {
    if (status.code() != absl::StatusCode::kAborted) {
      return absl::InternalError(
          absl::StrCat(what, " returned ", status.ToString(), "; want ABORTED"));
    }
    if (status.message().find(reason) == std::string::npos) {
      return absl::InternalError(absl::StrCat(what,
                                              " is ABORTED but its message does not carry "
                                              "the abort reason: ",
                                              status.message()));
    }
    return absl::OkStatus();
  };
  // A pending operation is failed by the abort, within the timeout. Rank 0
  // aborts first; the others wait on the main communicator until it has, so
  // that its recv fails because of its own abort, not because a peer left.
  if (with_pending) {
    auto pending = [&]() -> absl::Status {
      if (me != 0) return absl::OkStatus();
      CONFORMANCE_ASSIGN(buf, Filled(device_, 16 * es, 0));
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
                   dist_make_buffer(buf->data(), 16, dtype, device_), options_.op_timeout_ms);
      a.peer = 1;
      a.tag = 999999;  // never sent
      CONFORMANCE_ASSIGN(w, c.Start(DIST_COLL_RECV, a));
      absl::SleepFor(absl::Milliseconds(100));
      c.Abort(reason);
      const absl::Time start = absl::Now();
      absl::Status status = w->Wait(options_.op_timeout_ms);
      if (absl::IsDeadlineExceeded(status)) {
        return absl::DeadlineExceededError(absl::StrCat("a pending recv was still pending ",
                                                        absl::FormatDuration(absl::Now() - start),
                                                        " after comm_abort"));
      }
      return aborted(status, "the pending recv");
    };
    Record(pending_row, "-", "-", "-", pending());
    Sync();
  }
  c.Abort(reason);  // idempotent on rank 0
  // Later operations fail with ABORTED (at once or at wait).
  if (Declared(later)) {
    auto run = [&]() -> absl::Status {
      CONFORMANCE_ASSIGN(buf, Filled(device_, 16 * es, 0));
      CONFORMANCE_RETURN_IF_ERROR(buf->Upload());
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(buf->data(), 16, dtype, device_),
                   dist_make_buffer(buf->data(), 16, dtype, device_), options_.op_timeout_ms);
      absl::StatusOr<std::unique_ptr<Work>> w = c.Start(later, a);
      if (!w.ok()) return aborted(w.status(), "starting an operation after abort");
      absl::Status status = (*w)->Wait(options_.op_timeout_ms);
      return aborted(status, "an operation after abort");
    };
    Record(later_row, dist_dtype_name(dtype), "-", "16", run());
  }
  Sync();
  const absl::Time start = absl::Now();
  dup->reset();
  const absl::Duration took = absl::Now() - start;
  Record(destroy_row, "-", "-", "-",
         took < absl::Milliseconds(options_.op_timeout_ms + kWaitSlackMs)
             ? absl::OkStatus()
             : absl::DeadlineExceededError(absl::StrCat("took ", absl::FormatDuration(took))));
}

}  // namespace dist::conformance

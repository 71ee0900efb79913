// dist conformance kit: the suite's "mismatched" section.
// Ranks that disagree on a count: no crash, no hang.
#include <memory>
#include <string>
#include <utility>

#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::MismatchedCounts() {
  const int32_t world = comm_.world_size();
  if (world < 2 || !Declared(DIST_COLL_ALL_REDUCE)) {
    Skip("mismatched counts between ranks", "needs all_reduce and at least 2 ranks");
    return;
  }
  constexpr int64_t kShortTimeoutMs = 3000;
  Sync();  // communicator creation starts together, whatever came before
  absl::StatusOr<std::unique_ptr<Comm>> dup = comm_.Duplicate("mismatch", options_.op_timeout_ms);
  if (!dup.ok()) {
    Sync();
    Record("mismatched counts between ranks: no crash, no hang", "-", "sum", "8/16",
           Prefix(dup.status(), "creating the communicator for the check"));
    return;
  }
  Sync();  // every rank finished creating it
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  std::string outcome;
  auto run = [&]() -> absl::Status {
    // Rank 0 reduces 8 elements, the others 16: an error, or at worst a hang
    // that an abort ends. Never a crash.
    const uint64_t n = comm_.rank() == 0 ? 8 : 16;
    CONFORMANCE_ASSIGN(buf, Filled(device_, 64 * es, 0));
    CONFORMANCE_RETURN_IF_ERROR(buf->Upload());
    dist_op_args_t a = MakeArgs(dist_make_buffer(buf->data(), n, dtype, device_),
                                dist_make_buffer(buf->data(), n, dtype, device_), kShortTimeoutMs);
    absl::StatusOr<std::unique_ptr<Work>> w = (*dup)->Start(DIST_COLL_ALL_REDUCE, a);
    if (!w.ok()) {
      outcome = "error at start: " + w.status().ToString();
      return absl::OkStatus();
    }
    absl::Status status = (*w)->Wait(kShortTimeoutMs + 5000);
    if (!absl::IsDeadlineExceeded(status)) {
      outcome = status.ok() ? "not detected (completed)" : "error: " + status.ToString();
      return absl::OkStatus();
    }
    (*dup)->Abort("conformance kit: mismatched counts did not finish");
    status = (*w)->Wait(kShortTimeoutMs + 5000);
    if (absl::IsDeadlineExceeded(status)) {
      return absl::DeadlineExceededError(
          "mismatched all_reduce neither failed within its timeout nor after comm_abort");
    }
    outcome = "hung until aborted";
    return absl::OkStatus();
  };
  absl::Status status = run();
  (*dup)->Abort("conformance kit: end of the mismatched-counts check");
  dup->reset();
  Row row{"mismatched counts between ranks: no crash, no hang",
          dist_dtype_name(dtype),
          "sum",
          "8/16",
          status.ok() ? Outcome::kPass : Outcome::kFail,
          status.ok() ? outcome : status.ToString()};
  report_.Add(std::move(row));
}

}  // namespace dist::conformance

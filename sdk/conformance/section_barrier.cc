// dist conformance kit: the suite's "barrier" section.
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::Barrier() {
  if (!Declared(DIST_COLL_BARRIER)) {
    Skip("barrier", "barrier is not declared");
    return;
  }
  const int32_t world = comm_.world_size();
  dist_op_args_t args =
      MakeArgs(dist_make_buffer(nullptr, 0, DIST_UINT8, device_),
               dist_make_buffer(nullptr, 0, DIST_UINT8, device_), options_.op_timeout_ms);
  auto run = [&]() -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    CONFORMANCE_RETURN_IF_ERROR(
        StartAndWait(comm_, DIST_COLL_BARRIER, args, options_.op_timeout_ms));
    // The last rank arrives 400 ms late; nobody may leave before it arrives.
    constexpr absl::Duration kLate = absl::Milliseconds(400);
    const absl::Time start = absl::Now();
    if (comm_.rank() == world - 1) absl::SleepFor(kLate);
    CONFORMANCE_RETURN_IF_ERROR(
        StartAndWait(comm_, DIST_COLL_BARRIER, args, options_.op_timeout_ms));
    const absl::Duration waited = absl::Now() - start;
    if (world > 1 && waited < kLate / 2) {
      return absl::InternalError(
          absl::StrCat("left the barrier after ", absl::FormatDuration(waited), " while rank ",
                       world - 1, " arrived ", absl::FormatDuration(kLate), " late"));
    }
    return absl::OkStatus();
  };
  Record("barrier waits for the last rank", "-", "-", "-", run());
}

}  // namespace dist::conformance

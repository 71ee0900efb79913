// dist conformance kit: the suite's "peer_death" section.
// The last section: its highest rank exits abruptly.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::PeerDeath() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const std::string row = "peer death: survivors get an error naming the dead rank";
  if (world < 2 || !Declared(DIST_COLL_ALL_REDUCE)) {
    Skip(row, "needs all_reduce and at least 2 ranks");
    return;
  }
  if ((plugin_.caps.flags & DIST_CAP_NEEDS_LAUNCHER) != 0 ||
      std::getenv("OMPI_COMM_WORLD_RANK") != nullptr) {
    Skip(row, "under an MPI launcher a dying rank ends the whole job");
    return;
  }
  // The last rank dies (rank 0 may host the rendezvous store). The others
  // must get an error, not a hang, within the operation's timeout.
  constexpr int64_t kTimeoutMs = 5000;
  const int32_t victim = world - 1;
  Sync();
  absl::StatusOr<std::unique_ptr<Comm>> dup = comm_.Duplicate("peer_death", kTimeoutMs);
  Sync();
  if (!dup.ok()) {
    Record(row, "-", "-", "-", Prefix(dup.status(), "creating the communicator for the check"));
    return;
  }
  if (me == victim) {
    report_.Add(Row{row, "-", "-", "-", Outcome::kPass, "this rank exits abruptly"});
    std::fflush(nullptr);
    _exit(0);  // no destructors, no goodbye: as if killed
  }
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  std::string seen;  // the survivor's error, for the log
  auto run = [&]() -> absl::Status {
    absl::SleepFor(absl::Milliseconds(200));  // let it die first
    CONFORMANCE_ASSIGN(buf, Filled(device_, 1023 * es, 0));
    CONFORMANCE_RETURN_IF_ERROR(buf->Upload());
    dist_op_args_t a = MakeArgs(dist_make_buffer(buf->data(), 1023, dtype, device_),
                                dist_make_buffer(buf->data(), 1023, dtype, device_), kTimeoutMs);
    const absl::Time start = absl::Now();
    absl::Status status;
    absl::StatusOr<std::unique_ptr<Work>> w = (*dup)->Start(DIST_COLL_ALL_REDUCE, a);
    if (!w.ok()) {
      status = w.status();
    } else {
      // The communicator's timeout (or the group's, through the core) bounds it.
      status = (*w)->Wait(std::max(kTimeoutMs, options_.op_timeout_ms) + kWaitSlackMs);
      bool done = true;
      // DEADLINE_EXCEEDED is either the operation's own timeout error (fine:
      // it is done) or this wait giving up on it (not fine).
      if (absl::IsDeadlineExceeded(status)) (void)(*w)->Test(&done);
      if (!done) {
        (*dup)->Abort("conformance kit: all_reduce with a dead peer never ended");
        return absl::DeadlineExceededError(absl::StrCat("all_reduce with rank ", victim,
                                                        " dead was still running after ",
                                                        absl::FormatDuration(absl::Now() - start)));
      }
    }
    if (status.ok()) {
      return absl::InternalError(
          absl::StrCat("all_reduce succeeded although rank ", victim, " is dead"));
    }
    if (!NamesRank(std::string(status.message()), victim)) {
      return absl::InternalError(
          absl::StrCat("the error does not name rank ", victim, ": ", status.ToString()));
    }
    seen =
        absl::StrCat("after ", absl::FormatDuration(absl::Now() - start), ": ", status.ToString());
    return absl::OkStatus();
  };
  const absl::Status status = run();
  (*dup)->Abort("conformance kit: end of the peer-death check");
  dup->reset();
  Record(row, dist_dtype_name(dtype), "sum", "1023", status);
  if (status.ok() && me == 0) {
    std::fprintf(stderr, "[conformance r0] peer death: got the error %s\n", seen.c_str());
  }
  // The main communicator lost a rank too: nothing may use it any more.
  stuck_ = "a rank died on purpose";
}

}  // namespace dist::conformance

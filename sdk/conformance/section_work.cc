// dist conformance kit: the suite's "work" section.
// work_wait and work_test on finished and pending operations.
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sdk/conformance/reference.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::WorkSemantics() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  // Waiting again on a finished operation returns its result again.
  if (Declared(DIST_COLL_BARRIER)) {
    auto again = [&]() -> absl::Status {
      if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
                   dist_make_buffer(nullptr, 0, dtype, device_), options_.op_timeout_ms);
      CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_BARRIER, a));
      CONFORMANCE_RETURN_IF_ERROR(w->Wait(options_.op_timeout_ms + kWaitSlackMs));
      CONFORMANCE_RETURN_IF_ERROR(Prefix(w->Wait(0), "second work_wait(0)"));
      bool done = false;
      CONFORMANCE_RETURN_IF_ERROR(Prefix(w->Test(&done), "work_test after completion"));
      if (!done) return absl::InternalError("work_test says not done after work_wait returned OK");
      return absl::OkStatus();
    };
    Record("work_wait/work_test again after completion", "-", "-", "-", again());
  }
  // A receive that cannot complete yet: work_test says not done, work_wait
  // with a short timeout says DEADLINE_EXCEEDED and leaves it pending, and it
  // completes once the message is sent.
  if (!Declared(DIST_COLL_SEND) || !Declared(DIST_COLL_RECV) || world < 2) {
    Skip("work_wait timeout on a pending recv", "needs send/recv and at least 2 ranks");
    return;
  }
  auto pending = [&]() -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    constexpr uint64_t kN = 257;
    constexpr int64_t kTag = 4242;
    const ValueDomain domain{dtype, std::nullopt, world};
    const uint64_t seed = NextSeed();
    if (me == 1) {
      absl::SleepFor(absl::Milliseconds(600));
      CONFORMANCE_ASSIGN(s, Filled(device_, kN * es, 0));
      FillInput(domain, seed, me, 0, kN, s->host().data());
      CONFORMANCE_RETURN_IF_ERROR(s->Upload());
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(s->data(), kN, dtype, device_),
                   dist_make_buffer(nullptr, 0, dtype, device_), options_.op_timeout_ms);
      a.peer = 0;
      a.tag = kTag;
      return StartAndWait(comm_, DIST_COLL_SEND, a, options_.op_timeout_ms);
    }
    if (me != 0) return absl::OkStatus();
    CONFORMANCE_ASSIGN(r, Filled(device_, kN * es, 0xA5));
    CONFORMANCE_RETURN_IF_ERROR(r->Upload());
    dist_op_args_t a =
        MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
                 dist_make_buffer(r->data(), kN, dtype, device_), options_.op_timeout_ms);
    a.peer = 1;
    a.tag = kTag;
    CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_RECV, a));
    bool done = true;
    CONFORMANCE_RETURN_IF_ERROR(Prefix(w->Test(&done), "work_test on a pending recv"));
    if (done) return absl::InternalError("work_test says done before the peer sent anything");
    const absl::Time start = absl::Now();
    absl::Status status = w->Wait(50);
    const absl::Duration took = absl::Now() - start;
    if (!absl::IsDeadlineExceeded(status)) {
      return absl::InternalError(absl::StrCat("work_wait(50 ms) on a pending recv returned ",
                                              status.ToString(), "; want DEADLINE_EXCEEDED"));
    }
    if (took > absl::Milliseconds(450)) {
      return absl::InternalError(
          absl::StrCat("work_wait(50 ms) took ", absl::FormatDuration(took)));
    }
    status = w->Wait(options_.op_timeout_ms + kWaitSlackMs);
    if (absl::IsDeadlineExceeded(status)) stuck_ = "a recv never completed";
    CONFORMANCE_RETURN_IF_ERROR(Prefix(status, "waiting again after the timeout"));
    CONFORMANCE_RETURN_IF_ERROR(r->Download());
    std::vector<unsigned char> expected(kN * es);
    FillInput(domain, seed, 1, 0, kN, expected.data());
    return Prefix(CompareElements(dtype, r->host().data(), expected.data(), kN, 0),
                  "the late message");
  };
  Record("work_test/work_wait timeout on a pending recv", dist_dtype_name(dtype), "-", "257",
         pending());
}

}  // namespace dist::conformance

// dist conformance kit: the suite's "async" section.
// Many outstanding operations, waited out of order or polled.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sdk/conformance/reference.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::AsyncOrdering() {
  if (!Declared(DIST_COLL_ALL_REDUCE) || (OpsOf(DIST_COLL_ALL_REDUCE) & (1u << DIST_SUM)) == 0) {
    Skip("async: many outstanding operations", "all_reduce with sum is not declared");
    return;
  }
  const dist_dtype_t dtype = PreferredDtype();
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const size_t es = dist_dtype_size(dtype);
  constexpr int kOutstanding = 16;
  constexpr uint64_t kN = 1023;
  auto run = [&](bool reverse, bool poll) -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    const ValueDomain domain{dtype, DIST_SUM, world};
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<std::unique_ptr<Work>> works;
    std::vector<uint64_t> seeds;
    for (int i = 0; i < kOutstanding; ++i) {
      seeds.push_back(NextSeed());
      CONFORMANCE_ASSIGN(b, Filled(device_, kN * es, 0));
      FillInput(domain, seeds.back(), me, 0, kN, b->host().data());
      CONFORMANCE_RETURN_IF_ERROR(b->Upload());
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(b->data(), kN, dtype, device_),
                   dist_make_buffer(b->data(), kN, dtype, device_), options_.op_timeout_ms);
      CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_ALL_REDUCE, a));
      works.push_back(std::move(w));
      bufs.push_back(std::move(b));
    }
    const absl::Time deadline =
        absl::Now() + absl::Milliseconds(options_.op_timeout_ms + kWaitSlackMs);
    for (int k = 0; k < kOutstanding; ++k) {
      const int i = reverse ? kOutstanding - 1 - k : k;
      absl::Status status;
      if (poll) {
        bool done = false;
        while (!done) {
          status = works[i]->Test(&done);
          if (!status.ok()) break;
          if (absl::Now() > deadline) {
            stuck_ = "polled work never completed";
            return absl::DeadlineExceededError("work_test never reported done");
          }
          if (!done) std::this_thread::yield();
        }
      } else {
        status = works[i]->Wait(options_.op_timeout_ms + kWaitSlackMs);
        if (absl::IsDeadlineExceeded(status)) stuck_ = "an outstanding all_reduce never completed";
      }
      CONFORMANCE_RETURN_IF_ERROR(Prefix(status, absl::StrCat("operation ", i)));
    }
    for (int i = 0; i < kOutstanding; ++i) {
      CONFORMANCE_RETURN_IF_ERROR(bufs[i]->Download());
      std::vector<unsigned char> expected(kN * es);
      FillExpectedReduction(domain, seeds[i], 0, kN, expected.data());
      CONFORMANCE_RETURN_IF_ERROR(
          Prefix(CompareElements(dtype, bufs[i]->host().data(), expected.data(), kN, 0),
                 absl::StrCat("operation ", i, " of ", kOutstanding)));
    }
    return absl::OkStatus();
  };
  const std::string size = absl::StrCat(kN);
  Record("async: 16 outstanding all_reduce, waited in reverse", dist_dtype_name(dtype), "sum", size,
         run(true, false));
  Record("async: 16 outstanding all_reduce, work_test polled", dist_dtype_name(dtype), "sum", size,
         run(false, true));

  // A handle destroyed before completion: the operation still completes.
  auto destroyed = [&]() -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    const ValueDomain domain{dtype, DIST_SUM, world};
    const uint64_t seed = NextSeed();
    CONFORMANCE_ASSIGN(b, Filled(device_, kN * es, 0));
    FillInput(domain, seed, me, 0, kN, b->host().data());
    CONFORMANCE_RETURN_IF_ERROR(b->Upload());
    dist_op_args_t a =
        MakeArgs(dist_make_buffer(b->data(), kN, dtype, device_),
                 dist_make_buffer(b->data(), kN, dtype, device_), options_.op_timeout_ms);
    { CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_ALL_REDUCE, a)); }  // the handle goes at once
    // A later operation completes after it (issue order).
    Case later{DIST_COLL_ALL_REDUCE, dtype, DIST_SUM, 7, 0, false, NextSeed()};
    CONFORMANCE_RETURN_IF_ERROR(
        Prefix(RunCase(comm_, device_, later, options_.op_timeout_ms), "the later operation"));
    CONFORMANCE_RETURN_IF_ERROR(b->Download());
    std::vector<unsigned char> expected(kN * es);
    FillExpectedReduction(domain, seed, 0, kN, expected.data());
    return Prefix(CompareElements(dtype, b->host().data(), expected.data(), kN, 0),
                  "the operation whose handle was destroyed");
  };
  Record("async: work_destroy before completion", dist_dtype_name(dtype), "sum", size, destroyed());
}

}  // namespace dist::conformance

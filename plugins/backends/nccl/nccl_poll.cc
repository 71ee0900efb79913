#include "plugins/backends/nccl/nccl_poll.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "plugins/backends/nccl/cuda_status.h"

namespace dist_nccl {

void Backoff::Pause() {
  // About 50 us of yields first: most waits (an enqueue, a small collective)
  // end within that, and a sleep would add its own latency.
  if (rounds_ < 200) {
    ++rounds_;
    std::this_thread::yield();
    return;
  }
  absl::SleepFor(sleep_);
  sleep_ = std::min(sleep_ * 2, cap_);
}

absl::Status AwaitNccl(ncclComm_t comm, absl::Time deadline, const std::atomic<bool>* stop,
                       absl::string_view what) {
  Backoff backoff;
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
    if (query != ncclSuccess) {
      return NcclStatus(query, comm, absl::StrCat(what, ": ncclCommGetAsyncError"));
    }
    if (state != ncclInProgress) return NcclStatus(state, comm, what);
    if (stop != nullptr && stop->load(std::memory_order_acquire)) {
      return absl::AbortedError(absl::StrCat(what, ": the communicator is being aborted"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": still in progress at the deadline"));
    }
    backoff.Pause();
  }
}

}  // namespace dist_nccl

#include "plugins/backends/nccl/work_wait.h"

#include <cuda_runtime_api.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "plugins/backends/nccl/cuda_status.h"
#include "plugins/backends/nccl/nccl_poll.h"

namespace dist_nccl {

absl::Status WaitForWork(WorkState& work, Communicator& comm, absl::Duration timeout) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + timeout;
  absl::Time next_check = start + absl::Milliseconds(1);
  Backoff backoff(absl::Microseconds(200));
  while (true) {
    std::optional<absl::Status> result = comm.Poll(work);
    if (result.has_value()) return *result;
    const absl::Time now = absl::Now();
    if (now >= next_check) {
      comm.Check();  // may abort, which fails the work: seen on the next poll
      next_check = now + absl::Milliseconds(1);
      continue;
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(work.what(), ": not done after waiting ", absl::ToInt64Milliseconds(timeout),
                       " ms; the operation is still pending (wait again, or abort the group)"));
    }
    backoff.Pause();
  }
}

absl::Status WaitOnStream(WorkState& work, Communicator& comm, void* stream) {
  std::optional<absl::Status> result = comm.Poll(work);
  if (result.has_value() && !result->ok()) return *result;
  if (result.has_value()) return absl::OkStatus();  // done: nothing to wait for
  return CudaStatus(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), work.event(), 0),
                    absl::StrCat(work.what(), ": cudaStreamWaitEvent"));
}

}  // namespace dist_nccl

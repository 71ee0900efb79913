#include "plugins/backends/gloo/sync_limit.h"

#include <algorithm>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/allreduce_ring.h"
#include "plugins/backends/gloo/pair_access.h"

namespace dist_gloo {

size_t SyncMessageLimit(int64_t smallest_send_buffer) {
  const size_t quarter =
      smallest_send_buffer > 0 ? static_cast<size_t>(smallest_send_buffer) / 4 : 0;
  if (quarter == 0) return 0;
  size_t limit = 1;
  while (limit * 2 <= quarter && limit < kMaxSyncMessageBytes) limit *= 2;
  return limit;
}

size_t AgreeSyncMessageLimit(const std::shared_ptr<gloo::Context>& context, int send_buffer_bytes,
                             size_t max_message_bytes) {
  const size_t buffers_allow = SyncMessageLimit(EnlargeSendBuffers(*context, send_buffer_bytes));
  int64_t limit = static_cast<int64_t>(std::min(buffers_allow, max_message_bytes));
  if (context->size > 1) {
    // One element, so every message is 8 bytes: safe under any limit.
    const std::vector<int64_t*> data = {&limit};
    gloo::AllreduceRing<int64_t> agree(context, data, 1, gloo::ReductionFunction<int64_t>::min);
    agree.run();
  }
  // A peer's number is input: a negative one allows nothing, not 2^64.
  return limit < 0 ? 0 : static_cast<size_t>(limit);
}

}  // namespace dist_gloo

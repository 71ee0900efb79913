#include "tools/distbench/dist_ops.h"

#include "dist/cpp/status.hpp"

namespace distbench {
absl::Status RunThroughDist(dist_process_group_t* pg, const Case& c, void* send, void* recv,
                            dist_device_t device) {
  const dist_buffer_t s = dist_make_buffer(send, c.send_count(), c.dtype, device);
  const dist_buffer_t r = dist_make_buffer(recv, c.recv_count(), c.dtype, device);
  switch (c.op->op) {
    case Op::kAllReduce:
      return dist::TakeError(dist_all_reduce(pg, &s, &r, c.redop, nullptr));
    case Op::kBroadcast:
      return dist::TakeError(dist_broadcast(pg, &s, &r, c.root, nullptr));
    case Op::kReduce:
      return dist::TakeError(dist_reduce(pg, &s, &r, c.redop, c.root, nullptr));
    case Op::kAllGather:
      return dist::TakeError(dist_all_gather(pg, &s, &r, nullptr));
    case Op::kGather:
      return dist::TakeError(dist_gather(pg, &s, &r, c.root, nullptr));
    case Op::kScatter:
      return dist::TakeError(dist_scatter(pg, &s, &r, c.root, nullptr));
    case Op::kReduceScatter:
      return dist::TakeError(dist_reduce_scatter(pg, &s, &r, c.redop, nullptr));
    case Op::kAllToAll:
      return dist::TakeError(dist_all_to_all(pg, &s, &r, nullptr));
    case Op::kBarrier:
      return dist::TakeError(dist_barrier(pg, nullptr));
    case Op::kSendRecv: {
      // A ring shift: send to the next rank, receive from the previous one,
      // in one call (dist_sendrecv, as the raw side's MPI_Sendrecv). The
      // core or the backend issues the two in an order that no backend
      // deadlocks on (sendrecv_order.hpp).
      const int next = (c.rank + 1) % c.world_size;
      const int prev = (c.rank + c.world_size - 1) % c.world_size;
      return dist::TakeError(dist_sendrecv(pg, &s, next, &r, prev, 0));
    }
  }
  return absl::InternalError("unknown op");
}

}  // namespace distbench

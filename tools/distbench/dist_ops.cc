#include "tools/distbench/dist_ops.h"

#include "dist/cpp/status.hpp"

namespace distbench {
namespace {

// Waits for a work handle and frees it.
absl::Status Finish(dist_work_t* work) {
  absl::Status status = dist::TakeError(dist_work_wait(work, -1));
  dist_work_destroy(work);
  return status;
}

}  // namespace

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
      // A ring shift: send to the next rank, receive from the previous one.
      // Both are started before either is waited on, so no CPU backend
      // blocks; and even ranks send first, odd ranks receive first, so that
      // a backend that runs a rank's operations in the order they were
      // issued (NCCL, on one stream) cannot deadlock either.
      const int next = (c.rank + 1) % c.world_size;
      const int prev = (c.rank + c.world_size - 1) % c.world_size;
      dist_work_t* send_work = nullptr;
      dist_work_t* recv_work = nullptr;
      auto start_send = [&] { return dist::TakeError(dist_send(pg, &s, next, 0, &send_work)); };
      auto start_recv = [&] { return dist::TakeError(dist_recv(pg, &r, prev, 0, &recv_work)); };
      const bool send_first = c.rank % 2 == 0;
      DIST_RETURN_IF_ERROR(send_first ? start_send() : start_recv());
      absl::Status second = send_first ? start_recv() : start_send();
      if (!second.ok()) {
        dist_abort(pg, "distbench: send or recv failed");
        (void)Finish(send_first ? send_work : recv_work);
        return second;
      }
      absl::Status received = Finish(recv_work);
      absl::Status send_done = Finish(send_work);
      return received.ok() ? send_done : received;
    }
  }
  return absl::InternalError("unknown op");
}

}  // namespace distbench

// Gloo's own issue-time checks (the adapter made the common ones of
// dist/cpp/validate.hpp first), and the tag that makes ranks that disagree
// on an operation fail instead of corrupting each other's buffers.
#include "dist/cpp/validate.hpp"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "plugins/backends/gloo/op.h"

namespace dist_gloo {

uint64_t OpCount(dist_collective_t kind, const dist_op_args_t& a, int size) {
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
    case DIST_COLL_REDUCE:
    case DIST_COLL_ALL_GATHER:
    case DIST_COLL_GATHER:
    case DIST_COLL_SEND:
      return a.send.count;
    case DIST_COLL_BROADCAST:
    case DIST_COLL_SCATTER:
    case DIST_COLL_REDUCE_SCATTER:
    case DIST_COLL_RECV:
      return a.recv.count;
    case DIST_COLL_ALL_TO_ALL:
      return a.send.count / static_cast<uint64_t>(size);
    default:
      return 0;
  }
}

uint32_t MatchTag(const Op& op, int size) {
  const dist_op_args_t& a = op.args;
  const bool uses_recv_dtype =
      op.kind == DIST_COLL_BROADCAST || op.kind == DIST_COLL_SCATTER || op.kind == DIST_COLL_RECV;
  const uint64_t fields[] = {
      static_cast<uint64_t>(op.kind),
      OpCount(op.kind, a, size),
      static_cast<uint64_t>(uses_recv_dtype ? a.recv.dtype : a.send.dtype),
      static_cast<uint64_t>(dist::IsReducing(op.kind) ? a.op : 0),
      static_cast<uint64_t>(dist::IsRooted(op.kind) ? a.root : 0),
  };
  TagHash hash;
  for (uint64_t field : fields) hash.Mix(field);
  return hash.Tag();
}

absl::Status ValidateOp(dist_collective_t kind, const dist_op_args_t& args, int rank) {
  return dist::RequireDevice(kind, args, rank, DIST_DEVICE_CPU, "gloo backend",
                             "Gloo takes CPU memory only",
                             "use the nccl backend for CUDA buffers, or copy to CPU");
}

}  // namespace dist_gloo

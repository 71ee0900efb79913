// Issue-time checks. Everything here is local: a count that differs
// between ranks cannot be seen without talking to them.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "dist/cpp/reduce.hpp"
#include "plugins/backends/gloo/op.h"

namespace dist::gloo_backend {
namespace {

bool Reduces(dist_collective_t kind) {
  return kind == DIST_COLL_ALL_REDUCE || kind == DIST_COLL_REDUCE || kind == DIST_COLL_REDUCE_SCATTER;
}

bool Rooted(dist_collective_t kind) {
  return kind == DIST_COLL_BROADCAST || kind == DIST_COLL_REDUCE || kind == DIST_COLL_GATHER ||
         kind == DIST_COLL_SCATTER;
}

absl::Status CheckBuffer(dist_collective_t kind, const char* which, const dist_buffer_t& buffer,
                         uint64_t needed) {
  const char* op = dist_collective_name(kind);
  if (buffer.device.type != DIST_DEVICE_CPU) {
    return absl::UnimplementedError(absl::StrCat(
        "gloo backend: ", op, " got a ", dist_device_type_name(buffer.device.type), ":",
        buffer.device.index, " ", which,
        " buffer, but Gloo takes CPU memory only; use the nccl backend for CUDA buffers, or copy to CPU"));
  }
  if (dist_dtype_size(buffer.dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("gloo backend: ", op, " ", which,
                                                   " buffer has unknown dtype ",
                                                   static_cast<int>(buffer.dtype),
                                                   "; use a dist_dtype_t value"));
  }
  if (buffer.count < needed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo backend: ", op, " ", which, " buffer has ", buffer.count, " elements but needs ",
        needed, "; size it as backend_plugin.h describes for ", op));
  }
  if (needed > 0 && buffer.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("gloo backend: ", op, " ", which,
                                                   " buffer is NULL with ", needed,
                                                   " elements needed; pass the buffer"));
  }
  return absl::OkStatus();
}

}  // namespace

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
  const bool uses_recv_dtype = op.kind == DIST_COLL_BROADCAST || op.kind == DIST_COLL_SCATTER ||
                               op.kind == DIST_COLL_RECV;
  const uint64_t fields[] = {
      static_cast<uint64_t>(op.kind),
      OpCount(op.kind, a, size),
      static_cast<uint64_t>(uses_recv_dtype ? a.recv.dtype : a.send.dtype),
      static_cast<uint64_t>(Reduces(op.kind) ? a.op : 0),
      static_cast<uint64_t>(Rooted(op.kind) ? a.root : 0),
  };
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  for (uint64_t field : fields) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (field >> (8 * byte)) & 0xff;
      hash *= 0x100000001b3ull;
    }
  }
  return static_cast<uint32_t>(hash ^ (hash >> 32)) & 0x7fffffffu;
}

absl::Status ValidateOp(dist_collective_t kind, const dist_op_args_t& a, int rank, int size) {
  const char* op = dist_collective_name(kind);
  if (Reduces(kind)) {
    absl::Status status = ValidateReduceOp(a.send.dtype, a.op);
    if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("gloo backend: ", op, ": ", status.message()));
  }
  if (Rooted(kind) && (a.root < 0 || a.root >= size)) {
    return absl::InvalidArgumentError(absl::StrCat("gloo backend: ", op, " root ", a.root,
                                                   " is outside the group of ", size,
                                                   " ranks; pass a root in [0, ", size, ")"));
  }
  if ((kind == DIST_COLL_SEND || kind == DIST_COLL_RECV) && (a.peer < 0 || a.peer >= size || a.peer == rank)) {
    return absl::InvalidArgumentError(absl::StrCat("gloo backend: ", op, " peer ", a.peer,
                                                   " is not another rank of the group (rank ", rank,
                                                   " of ", size, "); pass a peer in [0, ", size,
                                                   ") other than this rank"));
  }
  const uint64_t w = static_cast<uint64_t>(size);
  const bool root = a.root == rank;
  const uint64_t n = OpCount(kind, a, size);
  absl::Status status;
  // Which buffers this rank uses, and how large each must be.
  bool use_send = false, use_recv = false;
  uint64_t send_needed = 0, recv_needed = 0;
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
      use_send = use_recv = true;
      send_needed = recv_needed = n;
      break;
    case DIST_COLL_BROADCAST:
      use_recv = true;
      recv_needed = n;
      use_send = root;
      send_needed = n;
      break;
    case DIST_COLL_REDUCE:
      use_send = true;
      send_needed = n;
      use_recv = root;
      recv_needed = n;
      break;
    case DIST_COLL_ALL_GATHER:
      use_send = use_recv = true;
      send_needed = n;
      recv_needed = n * w;
      break;
    case DIST_COLL_GATHER:
      use_send = true;
      send_needed = n;
      use_recv = root;
      recv_needed = n * w;
      break;
    case DIST_COLL_SCATTER:
      use_recv = true;
      recv_needed = n;
      use_send = root;
      send_needed = n * w;
      break;
    case DIST_COLL_REDUCE_SCATTER:
      use_send = use_recv = true;
      send_needed = n * w;
      recv_needed = n;
      break;
    case DIST_COLL_ALL_TO_ALL:
      if (a.send.count % w != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "gloo backend: all_to_all send buffer has ", a.send.count,
            " elements, not a multiple of the group size ", size, "; pass n*", size, " elements"));
      }
      use_send = use_recv = true;
      send_needed = recv_needed = n * w;
      break;
    case DIST_COLL_SEND:
      use_send = true;
      send_needed = n;
      break;
    case DIST_COLL_RECV:
      use_recv = true;
      recv_needed = n;
      break;
    default:
      return absl::OkStatus();  // barrier: no buffers
  }
  if (use_send) {
    status = CheckBuffer(kind, "send", a.send, send_needed);
    if (!status.ok()) return status;
  }
  if (use_recv) {
    status = CheckBuffer(kind, "recv", a.recv, recv_needed);
    if (!status.ok()) return status;
  }
  if (use_send && use_recv && a.send.dtype != a.recv.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo backend: ", op, " send is ", dist_dtype_name(a.send.dtype), " but recv is ",
        dist_dtype_name(a.recv.dtype), "; both buffers must have the same dtype"));
  }
  return absl::OkStatus();
}

}  // namespace dist::gloo_backend

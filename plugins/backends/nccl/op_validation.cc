#include "plugins/backends/nccl/op_validation.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/reduce.hpp"
#include "dist/types.h"

namespace dist::nccl {
namespace {

bool IsRooted(dist_collective_t op) {
  return op == DIST_COLL_BROADCAST || op == DIST_COLL_REDUCE || op == DIST_COLL_GATHER ||
         op == DIST_COLL_SCATTER;
}

bool IsReducing(dist_collective_t op) {
  return op == DIST_COLL_ALL_REDUCE || op == DIST_COLL_REDUCE || op == DIST_COLL_REDUCE_SCATTER;
}

std::string Prefix(dist_collective_t op) {
  return absl::StrCat("nccl ", dist_collective_name(op), ": ");
}

absl::Status Invalid(dist_collective_t op, const std::string& text) {
  return absl::InvalidArgumentError(absl::StrCat(Prefix(op), text));
}

absl::Status CheckBuffer(dist_collective_t op, const char* which, const dist_buffer_t& buffer,
                         const OpContext& ctx) {
  if (buffer.device.type == DIST_DEVICE_CPU) {
    return absl::UnimplementedError(CpuBufferMessage(op, which));
  }
  if (buffer.device.type != DIST_DEVICE_CUDA) {
    return Invalid(op,
                   absl::StrCat("the ", which, " buffer has unknown device type ",
                                static_cast<int>(buffer.device.type), "; use DIST_DEVICE_CUDA"));
  }
  if (buffer.device.index != ctx.device) {
    return Invalid(op, absl::StrCat("the ", which, " buffer is on cuda:", buffer.device.index,
                                    " but rank ", ctx.rank, "'s communicator uses cuda:",
                                    ctx.device, "; allocate the buffer on cuda:", ctx.device,
                                    " (one GPU per rank, chosen at init)"));
  }
  if (dist_dtype_size(buffer.dtype) == 0) {
    return Invalid(op, absl::StrCat("the ", which, " buffer has unknown dtype ",
                                    static_cast<int>(buffer.dtype)));
  }
  if (buffer.data == nullptr && buffer.count > 0) {
    return Invalid(op, absl::StrCat("the ", which, " buffer has ", buffer.count,
                                    " elements but data is NULL; pass device memory"));
  }
  return absl::OkStatus();
}

// count * world_size without wrapping around.
absl::StatusOr<uint64_t> Times(dist_collective_t op, uint64_t count, int32_t world_size) {
  const uint64_t w = static_cast<uint64_t>(world_size);
  if (count > std::numeric_limits<uint64_t>::max() / w) {
    return Invalid(op,
                   absl::StrCat("count ", count, " times world size ", world_size, " overflows"));
  }
  return count * w;
}

absl::Status ExpectCount(dist_collective_t op, const char* which, uint64_t actual,
                         uint64_t expected, const std::string& rule) {
  if (actual == expected) return absl::OkStatus();
  return Invalid(op, absl::StrCat("the ", which, " buffer has ", actual, " elements but needs ",
                                  expected, " (", rule, ")"));
}

absl::Status CheckCounts(dist_collective_t op, const dist_op_args_t& args, const UsedBuffers& used,
                         const OpContext& ctx) {
  const uint64_t send = args.send.count;
  const uint64_t recv = args.recv.count;
  const std::string w = absl::StrCat(ctx.world_size);
  switch (op) {
    case DIST_COLL_ALL_REDUCE:
    case DIST_COLL_BROADCAST:
    case DIST_COLL_REDUCE:
      if (used.send && used.recv) {
        return ExpectCount(op, "recv", recv, send, "recv[n] for send[n]");
      }
      return absl::OkStatus();
    case DIST_COLL_ALL_GATHER:
    case DIST_COLL_GATHER: {
      if (!used.recv) return absl::OkStatus();
      absl::StatusOr<uint64_t> expected = Times(op, send, ctx.world_size);
      if (!expected.ok()) return expected.status();
      return ExpectCount(op, "recv", recv, *expected, absl::StrCat("recv[n*W] for send[n], W=", w));
    }
    case DIST_COLL_SCATTER:
    case DIST_COLL_REDUCE_SCATTER: {
      if (!used.send) return absl::OkStatus();
      absl::StatusOr<uint64_t> expected = Times(op, recv, ctx.world_size);
      if (!expected.ok()) return expected.status();
      return ExpectCount(op, "send", send, *expected, absl::StrCat("send[n*W] for recv[n], W=", w));
    }
    case DIST_COLL_ALL_TO_ALL:
      if (send % static_cast<uint64_t>(ctx.world_size) != 0) {
        return Invalid(op, absl::StrCat("the send buffer has ", send,
                                        " elements, not a multiple of the world size ", w,
                                        " (send[n*W] -> recv[n*W])"));
      }
      return ExpectCount(op, "recv", recv, send, "recv[n*W] for send[n*W]");
    default: return absl::OkStatus();
  }
}

// Byte ranges [begin, end) of the two buffers, for aliasing checks.
struct Range {
  uintptr_t begin;
  uintptr_t end;
};
Range BytesOf(const dist_buffer_t& b) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(b.data);
  return Range{begin, begin + b.count * dist_dtype_size(b.dtype)};
}
bool Overlap(Range a, Range b) { return a.begin < b.end && b.begin < a.end; }

absl::Status CheckAliasing(dist_collective_t op, const dist_op_args_t& args,
                           const UsedBuffers& used, const OpContext& ctx) {
  if (!used.send || !used.recv) return absl::OkStatus();
  const Range send = BytesOf(args.send);
  const Range recv = BytesOf(args.recv);
  if (send.begin == send.end || recv.begin == recv.end) return absl::OkStatus();
  if (!Overlap(send, recv)) return absl::OkStatus();
  const size_t elem = dist_dtype_size(args.send.dtype);
  switch (op) {
    case DIST_COLL_ALL_REDUCE:
    case DIST_COLL_BROADCAST:
    case DIST_COLL_REDUCE:
      if (send.begin == recv.begin) return absl::OkStatus();  // in place
      return Invalid(op,
                     "send and recv overlap without being the same buffer; "
                     "pass the same pointer for in-place or separate buffers");
    case DIST_COLL_ALL_GATHER:
      if (send.begin == recv.begin + static_cast<uintptr_t>(ctx.rank) * args.send.count * elem) {
        return absl::OkStatus();  // NCCL's in-place all-gather
      }
      return Invalid(op,
                     absl::StrCat("send overlaps recv but is not rank ", ctx.rank,
                                  "'s block of it; in place, send must point at recv + rank*n"));
    case DIST_COLL_REDUCE_SCATTER:
      if (recv.begin == send.begin + static_cast<uintptr_t>(ctx.rank) * args.recv.count * elem) {
        return absl::OkStatus();  // NCCL's in-place reduce-scatter
      }
      return Invalid(op,
                     absl::StrCat("recv overlaps send but is not rank ", ctx.rank,
                                  "'s block of it; in place, recv must point at send + rank*n"));
    default:
      return Invalid(op,
                     "send and recv overlap, which this operation does not allow; "
                     "use separate send and recv buffers");
  }
}

absl::Status CheckReduceOp(dist_collective_t op, const dist_op_args_t& args,
                           const UsedBuffers& used) {
  const dist_dtype_t dtype = used.send ? args.send.dtype : args.recv.dtype;
  absl::Status valid = ValidateReduceOp(dtype, args.op);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Prefix(op), valid.message()));
  }
  if (IsBitwise(args.op)) {
    return absl::UnimplementedError(absl::StrCat(
        Prefix(op), "NCCL has no bitwise reductions (", dist_reduce_op_name(args.op),
        "); use sum, product, min, max or avg, or reduce CPU buffers with gloo, mpi or shm"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string CpuBufferMessage(dist_collective_t op, const char* which) {
  return absl::StrCat(Prefix(op), "the ", which,
                      " buffer is on the CPU but the nccl backend takes CUDA buffers only; "
                      "use gloo, mpi or shm for CPU buffers, or pick a backend per device "
                      "with DIST_BACKEND=cpu:gloo,cuda:nccl");
}

UsedBuffers BuffersUsed(dist_collective_t op, const dist_op_args_t& args, const OpContext& ctx) {
  const bool root = args.root == ctx.rank;
  switch (op) {
    case DIST_COLL_ALL_REDUCE:
    case DIST_COLL_ALL_GATHER:
    case DIST_COLL_REDUCE_SCATTER:
    case DIST_COLL_ALL_TO_ALL: return {true, true};
    case DIST_COLL_BROADCAST: return {root, true};
    case DIST_COLL_REDUCE:
    case DIST_COLL_GATHER: return {true, root};
    case DIST_COLL_SCATTER: return {root, true};
    case DIST_COLL_SEND: return {true, false};
    case DIST_COLL_RECV: return {false, true};
    default: return {false, false};
  }
}

absl::Status ValidateOpArgs(dist_collective_t op, const dist_op_args_t& args,
                            const OpContext& ctx) {
  if (static_cast<int>(op) < 0 || op >= DIST_COLLECTIVE_COUNT) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: unknown operation ", static_cast<int>(op)));
  }
  if (IsRooted(op) && (args.root < 0 || args.root >= ctx.world_size)) {
    return Invalid(op, absl::StrCat("root ", args.root, " is outside 0..", ctx.world_size - 1));
  }
  if (op == DIST_COLL_SEND || op == DIST_COLL_RECV) {
    if (args.peer < 0 || args.peer >= ctx.world_size) {
      return Invalid(op, absl::StrCat("peer ", args.peer, " is outside 0..", ctx.world_size - 1));
    }
    if (args.peer == ctx.rank) {
      return Invalid(op, absl::StrCat("rank ", ctx.rank, " cannot ", dist_collective_name(op),
                                      " to itself (NCCL would wait forever); copy locally"));
    }
  }
  const UsedBuffers used = BuffersUsed(op, args, ctx);
  if (used.send) {
    absl::Status status = CheckBuffer(op, "send", args.send, ctx);
    if (!status.ok()) return status;
  }
  if (used.recv) {
    absl::Status status = CheckBuffer(op, "recv", args.recv, ctx);
    if (!status.ok()) return status;
  }
  if (used.send && used.recv && args.send.dtype != args.recv.dtype) {
    return Invalid(op, absl::StrCat("send is ", dist_dtype_name(args.send.dtype), " but recv is ",
                                    dist_dtype_name(args.recv.dtype), "; use one dtype for both"));
  }
  absl::Status counts = CheckCounts(op, args, used, ctx);
  if (!counts.ok()) return counts;
  absl::Status aliasing = CheckAliasing(op, args, used, ctx);
  if (!aliasing.ok()) return aliasing;
  if (IsReducing(op)) return CheckReduceOp(op, args, used);
  return absl::OkStatus();
}

absl::StatusOr<void*> ResolveStream(dist_collective_t op, const dist_op_args_t& args,
                                    const OpContext& ctx) {
  const UsedBuffers used = BuffersUsed(op, args, ctx);
  void* send = used.send ? args.send.stream : nullptr;
  void* recv = used.recv ? args.recv.stream : nullptr;
  if (send != nullptr && recv != nullptr && send != recv) {
    return Invalid(op,
                   "send and recv name different CUDA streams; give both the same "
                   "stream, or only one");
  }
  return recv != nullptr ? recv : send;
}

}  // namespace dist::nccl

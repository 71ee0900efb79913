#include "plugins/backends/nccl/op_validation.h"

#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/validate.hpp"
#include "dist/types.h"

namespace dist_nccl {
namespace {

// `name` is the operation's, as dist_collective_name or VariableName give it.
std::string Prefix(const std::string& name) { return absl::StrCat("nccl ", name, ": "); }

absl::Status Invalid(const std::string& name, const std::string& text) {
  return absl::InvalidArgumentError(absl::StrCat(Prefix(name), text));
}

std::string CpuBufferText(const std::string& name, const char* which) {
  return absl::StrCat(Prefix(name), "the ", which,
                      " buffer is on the CPU but the nccl backend takes CUDA buffers only; "
                      "use gloo, mpi or shm for CPU buffers, or pick a backend per device "
                      "with DIST_BACKEND=cpu:gloo,cuda:nccl");
}

absl::Status CheckBuffer(const std::string& name, const char* which, const dist_buffer_t& buffer,
                         const OpContext& ctx) {
  if (buffer.device.type == DIST_DEVICE_CPU) {
    return absl::UnimplementedError(CpuBufferText(name, which));
  }
  if (buffer.device.type != DIST_DEVICE_CUDA) {
    return Invalid(name,
                   absl::StrCat("the ", which, " buffer has unknown device type ",
                                static_cast<int>(buffer.device.type), "; use DIST_DEVICE_CUDA"));
  }
  if (buffer.device.index != ctx.device) {
    return Invalid(name, absl::StrCat("the ", which, " buffer is on cuda:", buffer.device.index,
                                      " but rank ", ctx.rank, "'s communicator uses cuda:",
                                      ctx.device, "; allocate the buffer on cuda:", ctx.device,
                                      " (one GPU per rank, chosen at init)"));
  }
  return absl::OkStatus();
}

absl::Status CheckBuffer(dist_collective_t op, const char* which, const dist_buffer_t& buffer,
                         const OpContext& ctx) {
  return CheckBuffer(dist_collective_name(op), which, buffer, ctx);
}

// The common checks matched the op to the dtype; NCCL lacks the bitwise ones.
absl::Status CheckReduceOp(const std::string& name, const dist_op_args_t& args) {
  if (dist::IsBitwise(args.op)) {
    return absl::UnimplementedError(absl::StrCat(
        Prefix(name), "NCCL has no bitwise reductions (", dist_reduce_op_name(args.op),
        "); use sum, product, min, max or avg, or reduce CPU buffers with gloo, mpi or shm"));
  }
  return absl::OkStatus();
}

// The stream of the buffers `used`: the recv buffer's, else the send
// buffer's; two different streams are an error.
absl::StatusOr<void*> PickStream(const std::string& name, const dist_op_args_t& args,
                                 const dist::UsedBuffers& used) {
  void* send = used.send ? args.send.stream : nullptr;
  void* recv = used.recv ? args.recv.stream : nullptr;
  if (send != nullptr && recv != nullptr && send != recv) {
    return Invalid(name,
                   "send and recv name different CUDA streams; give both the same "
                   "stream, or only one");
  }
  return recv != nullptr ? recv : send;
}

// run_v answers UNIMPLEMENTED only to hand a kind back to the core, so a
// refusal of this rank's arguments is INVALID_ARGUMENT there.
absl::Status AsInvalid(const absl::Status& status) {
  if (!absl::IsUnimplemented(status)) return status;
  return absl::InvalidArgumentError(status.message());
}

// Packed displacements (rank order) where `displs` is NULL.
std::vector<uint64_t> Displacements(const uint64_t* counts, const uint64_t* displs, int world) {
  std::vector<uint64_t> out(static_cast<size_t>(world));
  uint64_t packed = 0;
  for (size_t r = 0; r < out.size(); ++r) {
    out[r] = displs != nullptr ? displs[r] : packed;
    packed += counts[r];
  }
  return out;
}

uint64_t Sum(const std::vector<uint64_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), uint64_t{0});
}

absl::Status CheckBlocks(const std::string& name, const char* which, const dist_buffer_t& buffer,
                         const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs) {
  for (size_t r = 0; r < counts.size(); ++r) {
    // Written so that no sum can overflow.
    if (displs[r] > buffer.count || counts[r] > buffer.count - displs[r]) {
      return Invalid(
          name, absl::StrCat("the ", which, " block of rank ", r, " (", counts[r], " elements at ",
                             displs[r], ") ends past the ", which, " buffer's ", buffer.count,
                             " elements; pass counts and displacements that fit it"));
    }
  }
  return absl::OkStatus();
}

// Byte addresses of `count` elements of `buffer` from element `first`.
struct Span {
  uintptr_t begin;
  uintptr_t end;
};
Span SpanOf(const dist_buffer_t& buffer, uint64_t first, uint64_t count) {
  const size_t size = dist_dtype_size(buffer.dtype);
  const uintptr_t base = reinterpret_cast<uintptr_t>(buffer.data);
  return {base + first * size, base + (first + count) * size};
}
bool Overlap(const Span& a, const Span& b) { return a.begin < b.end && b.begin < a.end; }

// Send and recv may share memory only in NCCL's in-place layouts: grouped
// send/recv and reductions otherwise read data that another part of the
// same group already overwrote.
absl::Status CheckOverlap(dist_collective_t kind, const std::string& name,
                          const dist_op_args_t& args, const VariableBlocks& blocks, int rank) {
  if (!Overlap(SpanOf(args.send, 0, args.send.count), SpanOf(args.recv, 0, args.recv.count))) {
    return absl::OkStatus();
  }
  const uint64_t own = blocks.recv_displs[static_cast<size_t>(rank)];
  if (kind == DIST_COLL_ALL_GATHER) {
    if (SpanOf(args.recv, own, 0).begin == SpanOf(args.send, 0, 0).begin) return absl::OkStatus();
    return Invalid(name,
                   absl::StrCat("send overlaps recv but is not recv's own block (element ", own,
                                "); pass that block as send to run in place, or "
                                "use separate buffers"));
  }
  if (kind == DIST_COLL_REDUCE_SCATTER) {
    if (SpanOf(args.send, own, 0).begin == SpanOf(args.recv, 0, 0).begin) return absl::OkStatus();
    return Invalid(name,
                   absl::StrCat("recv overlaps send but is not send's own block (element ", own,
                                "); pass that block as recv to run in place, or "
                                "use separate buffers"));
  }
  return Invalid(name,
                 "send and recv overlap, which NCCL's grouped send/recv cannot run in place; "
                 "use separate send and recv buffers");
}

}  // namespace

std::string CpuBufferMessage(dist_collective_t op, const char* which) {
  return CpuBufferText(dist_collective_name(op), which);
}

absl::Status ValidateOpArgs(dist_collective_t op, const dist_op_args_t& args,
                            const OpContext& ctx) {
  if (static_cast<int>(op) < 0 || op >= DIST_COLLECTIVE_COUNT) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: unknown operation ", static_cast<int>(op)));
  }
  const dist::UsedBuffers used = dist::BuffersUsed(op, args, ctx.rank);
  if (used.send) {
    absl::Status status = CheckBuffer(op, "send", args.send, ctx);
    if (!status.ok()) return status;
  }
  if (used.recv) {
    absl::Status status = CheckBuffer(op, "recv", args.recv, ctx);
    if (!status.ok()) return status;
  }
  if (dist::IsReducing(op)) return CheckReduceOp(dist_collective_name(op), args);
  return absl::OkStatus();
}

absl::StatusOr<void*> ResolveStream(dist_collective_t op, const dist_op_args_t& args,
                                    const OpContext& ctx) {
  return PickStream(dist_collective_name(op), args, dist::BuffersUsed(op, args, ctx.rank));
}

}  // namespace dist_nccl

namespace dist_nccl {

std::string VariableName(dist_collective_t kind) {
  return absl::StrCat(dist_collective_name(kind), "_v");
}

absl::StatusOr<VariableBlocks> CheckVariableArgs(dist_collective_t kind, const dist_op_args_t& args,
                                                 const dist_op_counts_t& counts,
                                                 const OpContext& ctx) {
  if (kind != DIST_COLL_ALL_TO_ALL && kind != DIST_COLL_ALL_GATHER &&
      kind != DIST_COLL_REDUCE_SCATTER) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: run_v: ", static_cast<int>(kind),
                                                   " is not a variable-count collective"));
  }
  const std::string name = VariableName(kind);
  const int world = ctx.world_size;
  const size_t rank = static_cast<size_t>(ctx.rank);
  if (counts.recv_counts == nullptr) {
    return Invalid(name, "recv_counts is NULL; pass one count per rank");
  }
  VariableBlocks blocks;
  blocks.recv_counts.assign(counts.recv_counts, counts.recv_counts + world);
  const uint64_t recv_total = Sum(blocks.recv_counts);
  const uint64_t own = blocks.recv_counts[rank];
  if (kind == DIST_COLL_ALL_TO_ALL) {
    if (counts.send_counts == nullptr) {
      return Invalid(name, "send_counts is NULL; pass one count per rank");
    }
    blocks.send_counts.assign(counts.send_counts, counts.send_counts + world);
    blocks.send_displs = Displacements(counts.send_counts, counts.send_displs, world);
    blocks.recv_displs = Displacements(counts.recv_counts, counts.recv_displs, world);
    absl::Status status =
        CheckBlocks(name, "send", args.send, blocks.send_counts, blocks.send_displs);
    if (!status.ok()) return status;
    status = CheckBlocks(name, "recv", args.recv, blocks.recv_counts, blocks.recv_displs);
    if (!status.ok()) return status;
    if (blocks.send_counts[rank] != own) {
      return Invalid(
          name, absl::StrCat("rank ", rank, " sends itself ", blocks.send_counts[rank],
                             " elements but expects ", own, " from itself; make send_counts[", rank,
                             "] equal recv_counts[", rank, "]"));
    }
    blocks.uses_send = Sum(blocks.send_counts) > 0;
    blocks.uses_recv = recv_total > 0;
  } else if (kind == DIST_COLL_ALL_GATHER) {
    blocks.recv_displs = Displacements(counts.recv_counts, counts.recv_displs, world);
    if (args.send.count != own) {
      return Invalid(name, absl::StrCat("send has ", args.send.count, " elements but recv_counts[",
                                        rank, "] is ", own, "; make them equal"));
    }
    absl::Status status =
        CheckBlocks(name, "recv", args.recv, blocks.recv_counts, blocks.recv_displs);
    if (!status.ok()) return status;
    blocks.uses_send = own > 0;
    blocks.uses_recv = recv_total > 0;
  } else {
    // dist.h lays send out packed, whatever displacements came along.
    blocks.recv_displs = Displacements(counts.recv_counts, nullptr, world);
    if (args.send.count != recv_total || args.recv.count != own) {
      return Invalid(
          name, absl::StrCat("send must hold the sum of recv_counts (", recv_total,
                             " elements, has ", args.send.count, ") and recv this rank's count (",
                             own, ", has ", args.recv.count, ")"));
    }
    blocks.uses_send = recv_total > 0;
    blocks.uses_recv = own > 0;
  }
  if (blocks.uses_send && blocks.uses_recv && args.send.dtype != args.recv.dtype) {
    return Invalid(name, absl::StrCat("send is ", dist_dtype_name(args.send.dtype), " but recv is ",
                                      dist_dtype_name(args.recv.dtype), "; use one dtype"));
  }
  for (const auto& [used, which, buffer] :
       {std::make_tuple(blocks.uses_send, "send", &args.send),
        std::make_tuple(blocks.uses_recv, "recv", &args.recv)}) {
    if (!used) continue;
    absl::Status status = AsInvalid(CheckBuffer(name, which, *buffer, ctx));
    if (!status.ok()) return status;
    if (buffer->data == nullptr) {
      return Invalid(name, absl::StrCat("the ", which,
                                        " buffer is NULL but its blocks are not "
                                        "empty; pass the buffer"));
    }
  }
  if (kind == DIST_COLL_REDUCE_SCATTER) {
    absl::Status status = AsInvalid(CheckReduceOp(name, args));
    if (!status.ok()) return status;
  }
  if (blocks.uses_send && blocks.uses_recv) {
    absl::Status status = CheckOverlap(kind, name, args, blocks, ctx.rank);
    if (!status.ok()) return status;
  }
  if (kind == DIST_COLL_REDUCE_SCATTER) {
    const uint64_t n = blocks.recv_counts[0];
    blocks.uniform = n > 0;
    for (size_t r = 0; r < blocks.recv_counts.size(); ++r) {
      if (blocks.recv_counts[r] != n || blocks.recv_displs[r] != n * r) blocks.uniform = false;
    }
  }
  return blocks;
}

absl::StatusOr<void*> ResolveVariableStream(dist_collective_t kind, const dist_op_args_t& args,
                                            const VariableBlocks& blocks) {
  return PickStream(VariableName(kind), args, {blocks.uses_send, blocks.uses_recv});
}

}  // namespace dist_nccl

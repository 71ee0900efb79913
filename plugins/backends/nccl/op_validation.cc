#include "plugins/backends/nccl/op_validation.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/validate.hpp"
#include "dist/types.h"

namespace dist_nccl {
namespace {

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
  return absl::OkStatus();
}

// The common checks matched the op to the dtype; NCCL lacks the bitwise ones.
absl::Status CheckReduceOp(dist_collective_t op, const dist_op_args_t& args) {
  if (dist::IsBitwise(args.op)) {
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
  if (dist::IsReducing(op)) return CheckReduceOp(op, args);
  return absl::OkStatus();
}

absl::StatusOr<void*> ResolveStream(dist_collective_t op, const dist_op_args_t& args,
                                    const OpContext& ctx) {
  const dist::UsedBuffers used = dist::BuffersUsed(op, args, ctx.rank);
  void* send = used.send ? args.send.stream : nullptr;
  void* recv = used.recv ? args.recv.stream : nullptr;
  if (send != nullptr && recv != nullptr && send != recv) {
    return Invalid(op,
                   "send and recv name different CUDA streams; give both the same "
                   "stream, or only one");
  }
  return recv != nullptr ? recv : send;
}

}  // namespace dist_nccl

// dist SDK, C++ side: checks an operation's arguments against the buffer
// shapes of backend_plugin.h, so that the core and every plugin give the same
// one-line errors for the same mistakes. The core runs these checks for
// dist.h callers, and the backend adapter (dist/cpp/backend_adapter.hpp)
// runs the same ones for callers of a plugin's table: one buffer rule.
#ifndef DIST_CPP_VALIDATE_HPP_
#define DIST_CPP_VALIDATE_HPP_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "dist/types.h"

namespace dist {

inline bool IsReducing(dist_collective_t kind) {
  return kind == DIST_COLL_ALL_REDUCE || kind == DIST_COLL_REDUCE ||
         kind == DIST_COLL_REDUCE_SCATTER;
}

inline bool IsRooted(dist_collective_t kind) {
  return kind == DIST_COLL_BROADCAST || kind == DIST_COLL_REDUCE || kind == DIST_COLL_GATHER ||
         kind == DIST_COLL_SCATTER;
}

// Which of the two buffers `kind` reads or writes on `rank` (barrier: none).
struct UsedBuffers {
  bool send = false;
  bool recv = false;
};
inline UsedBuffers BuffersUsed(dist_collective_t kind, const dist_op_args_t& args, int rank) {
  if (kind == DIST_COLL_BARRIER) return {};
  const bool is_root = args.root == rank;
  UsedBuffers used;
  used.send = kind != DIST_COLL_RECV && !(kind == DIST_COLL_BROADCAST && !is_root) &&
              !(kind == DIST_COLL_SCATTER && !is_root);
  used.recv = kind != DIST_COLL_SEND && !(kind == DIST_COLL_REDUCE && !is_root) &&
              !(kind == DIST_COLL_GATHER && !is_root);
  return used;
}

// The device buffer of `kind` on `rank` that is not on `device`, or nullptr
// when every buffer it uses is there. `*which` names it ("send"/"recv").
inline const dist_buffer_t* BufferOffDevice(dist_collective_t kind, const dist_op_args_t& args,
                                            int rank, dist_device_type_t device,
                                            const char** which) {
  const UsedBuffers used = BuffersUsed(kind, args, rank);
  if (used.send && args.send.device.type != device) {
    *which = "send";
    return &args.send;
  }
  if (used.recv && args.recv.device.type != device) {
    *which = "recv";
    return &args.recv;
  }
  return nullptr;
}

// UNIMPLEMENTED when a buffer `kind` uses on `rank` is not on `device`, as
// "<plugin>: <op> got a cuda:0 send buffer, but <takes>; <fix>".
inline absl::Status RequireDevice(dist_collective_t kind, const dist_op_args_t& args, int rank,
                                  dist_device_type_t device, const char* plugin, const char* takes,
                                  const char* fix) {
  // Every call of a one-device plugin passes here: both buffers there is
  // the common answer, found without working out which ones the call uses.
  if (args.send.device.type == device && args.recv.device.type == device) return absl::OkStatus();
  const char* which = nullptr;
  const dist_buffer_t* off = BufferOffDevice(kind, args, rank, device, &which);
  if (off == nullptr) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      plugin, ": ", dist_collective_name(kind), " got a ", dist_device_type_name(off->device.type),
      ":", off->device.index, " ", which, " buffer, but ", takes, "; ", fix));
}

namespace internal {

inline absl::Status CheckBuffer(const char* op, const char* which, const dist_buffer_t& buffer) {
  if (dist_dtype_size(buffer.dtype) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " buffer has unknown dtype ",
                                                   static_cast<int>(buffer.dtype)));
  }
  if (buffer.count > 0 && buffer.data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", which, " buffer is NULL with count ", buffer.count));
  }
  if (static_cast<int>(buffer.device.type) < 0 || buffer.device.type >= DIST_DEVICE_TYPE_COUNT) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " buffer has unknown device ",
                                                   static_cast<int>(buffer.device.type)));
  }
  return absl::OkStatus();
}

inline absl::Status CheckCount(const char* op, const char* which, uint64_t actual,
                               uint64_t expected, const char* rule) {
  if (actual == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, " count is ", actual,
                                                 " but must be ", expected, " (", rule, ")"));
}

// CheckCount against base x world, which must not overflow (a wrapped
// product could equal a small count and pass).
inline absl::Status CheckCountTimes(const char* op, const char* which, uint64_t actual,
                                    const char* base_name, uint64_t base, uint64_t world,
                                    const char* rule) {
  uint64_t expected = 0;
  if (__builtin_mul_overflow(base, world, &expected)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", base_name, " count ", base, " x world size ", world, " overflows"));
  }
  return CheckCount(op, which, actual, expected, rule);
}

// The one rule for a send and a recv buffer that share memory, for every
// backend: disjoint, or in place in the collective's layout (all_reduce,
// broadcast and reduce: the same buffer; all_gather: send is this rank's
// block of recv; reduce_scatter: recv is this rank's block of send). Any
// other overlap, and any overlap in gather, scatter and all_to_all, is
// INVALID_ARGUMENT. Called once the counts are known to be right.
inline absl::Status CheckOverlap(const char* op, dist_collective_t kind, const dist_op_args_t& args,
                                 int rank) {
  const uint64_t element = dist_dtype_size(args.send.dtype);
  const uintptr_t send = reinterpret_cast<uintptr_t>(args.send.data);
  const uintptr_t recv = reinterpret_cast<uintptr_t>(args.recv.data);
  const uint64_t send_bytes = args.send.count * element;
  const uint64_t recv_bytes = args.recv.count * element;
  if (send == 0 || recv == 0 || send_bytes == 0 || recv_bytes == 0) return absl::OkStatus();
  if (send >= recv + recv_bytes || recv >= send + send_bytes) return absl::OkStatus();
  const uint64_t me = static_cast<uint64_t>(rank);
  const char* layout = nullptr;
  bool in_place = false;
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
    case DIST_COLL_BROADCAST:
    case DIST_COLL_REDUCE:
      in_place = send == recv;
      layout = "send and recv the same buffer";
      break;
    case DIST_COLL_ALL_GATHER:
      in_place = send == recv + me * send_bytes;
      layout = "send at this rank's block of recv";
      break;
    case DIST_COLL_REDUCE_SCATTER:
      in_place = recv == send + me * recv_bytes;
      layout = "recv at this rank's block of send";
      break;
    default:
      break;
  }
  if (in_place) return absl::OkStatus();
  if (layout == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": send and recv overlap, and ", op,
                                                   " does not run in place; use separate buffers"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": send and recv overlap without being in place (", layout,
                   "); lay them out that way or use separate buffers"));
}

// The count rule of backend_plugin.h's table, for ValidateOpArgs.
inline absl::Status CheckCounts(const char* op, dist_collective_t kind, const dist_op_args_t& args,
                                bool is_root, uint64_t w) {
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
      return internal::CheckCount(op, "recv", args.recv.count, args.send.count, "equal to send");
    case DIST_COLL_BROADCAST:
      if (is_root) {
        return internal::CheckCount(op, "recv", args.recv.count, args.send.count,
                                    "equal to send on the root");
      }
      return absl::OkStatus();
    case DIST_COLL_REDUCE:
      if (is_root) {
        return internal::CheckCount(op, "recv", args.recv.count, args.send.count,
                                    "equal to send on the root");
      }
      return absl::OkStatus();
    case DIST_COLL_ALL_GATHER:
      return internal::CheckCountTimes(op, "recv", args.recv.count, "send", args.send.count, w,
                                       "send count x world size");
    case DIST_COLL_GATHER:
      if (is_root) {
        return internal::CheckCountTimes(op, "recv", args.recv.count, "send", args.send.count, w,
                                         "send count x world size on the root");
      }
      return absl::OkStatus();
    case DIST_COLL_SCATTER:
      if (is_root) {
        return internal::CheckCountTimes(op, "send", args.send.count, "recv", args.recv.count, w,
                                         "recv count x world size on the root");
      }
      return absl::OkStatus();
    case DIST_COLL_REDUCE_SCATTER:
      return internal::CheckCountTimes(op, "send", args.send.count, "recv", args.recv.count, w,
                                       "recv count x world size");
    case DIST_COLL_ALL_TO_ALL:
      if (args.send.count % w != 0) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": send count ", args.send.count,
                                                       " is not a multiple of the world size ", w));
      }
      return internal::CheckCount(op, "recv", args.recv.count, args.send.count, "equal to send");
    default:
      return absl::OkStatus();
  }
}

}  // namespace internal

// Validates `args` for `kind` on a rank of a communicator of `world_size`.
inline absl::Status ValidateOpArgs(dist_collective_t kind, const dist_op_args_t& args, int rank,
                                   int world_size) {
  const char* op = dist_collective_name(kind);
  const uint64_t w = static_cast<uint64_t>(world_size);
  if (IsRooted(kind) && (args.root < 0 || args.root >= world_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": root ", args.root, " is outside [0, ", world_size, ")"));
  }
  if ((kind == DIST_COLL_SEND || kind == DIST_COLL_RECV) &&
      (args.peer < 0 || args.peer >= world_size || args.peer == rank)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": peer ", args.peer,
                                                   " must be another rank in [0, ", world_size,
                                                   ") (this is rank ", rank, ")"));
  }
  if (kind == DIST_COLL_BARRIER) return absl::OkStatus();
  const bool is_root = args.root == rank;
  const UsedBuffers used = BuffersUsed(kind, args, rank);
  const bool uses_send = used.send;
  const bool uses_recv = used.recv;
  if (uses_send) DIST_RETURN_IF_ERROR(internal::CheckBuffer(op, "send", args.send));
  if (uses_recv) DIST_RETURN_IF_ERROR(internal::CheckBuffer(op, "recv", args.recv));
  if (uses_send && uses_recv) {
    if (args.send.dtype != args.recv.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": send dtype ", dist_dtype_name(args.send.dtype),
                       " differs from recv dtype ", dist_dtype_name(args.recv.dtype)));
    }
    if (args.send.device.type != args.recv.device.type ||
        args.send.device.index != args.recv.device.index) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": send and recv buffers are on different devices"));
    }
  }
  if (IsReducing(kind)) {
    DIST_RETURN_IF_ERROR(ValidateReduceOp(uses_send ? args.send.dtype : args.recv.dtype, args.op));
  }
  // n * W below must not wrap around.
  const uint64_t per_rank = kind == DIST_COLL_SCATTER || kind == DIST_COLL_REDUCE_SCATTER
                                ? args.recv.count
                                : args.send.count;
  const bool multiplies = kind == DIST_COLL_ALL_GATHER || kind == DIST_COLL_GATHER ||
                          kind == DIST_COLL_SCATTER || kind == DIST_COLL_REDUCE_SCATTER;
  if (multiplies && per_rank > UINT64_MAX / w) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": count ", per_rank, " times world size ", world_size, " overflows"));
  }
  DIST_RETURN_IF_ERROR(internal::CheckCounts(op, kind, args, is_root, w));
  if (!uses_send || !uses_recv) return absl::OkStatus();
  return internal::CheckOverlap(op, kind, args, rank);
}

}  // namespace dist

#endif  // DIST_CPP_VALIDATE_HPP_

#include "core/op_sizes.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/config.h"
#include "dist/cpp/status.hpp"
#include "dist/cpp/validate.hpp"
#include "dist/types.h"

namespace dist {
namespace {

absl::Status Overflow(const char* op, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", what, "; check the count (it must describe the buffer you pass)"));
}

// count x element size fits in the address space from the buffer's start.
absl::Status CheckBufferBytes(const char* op, const char* which, const dist_buffer_t& buffer) {
  const uint64_t element = dist_dtype_size(buffer.dtype);
  if (element == 0 || buffer.count == 0) return absl::OkStatus();  // dtype: ValidateOpArgs
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(buffer.count, element, &bytes) ||
      bytes > static_cast<uint64_t>(PTRDIFF_MAX)) {
    return Overflow(
        op, absl::StrCat(which, " buffer of ", buffer.count, " ", dist_dtype_name(buffer.dtype),
                         " elements (", element, " bytes each) is larger than any buffer can be"));
  }
  uintptr_t end = 0;
  if (__builtin_add_overflow(reinterpret_cast<uintptr_t>(buffer.data), bytes, &end)) {
    return Overflow(op, absl::StrCat(which, " buffer at 0x",
                                     absl::Hex(reinterpret_cast<uintptr_t>(buffer.data)), " with ",
                                     bytes, " bytes would end past the end of the address space"));
  }
  return absl::OkStatus();
}

// `count` x world size elements (all of one rank's gather or scatter
// buffer) does not overflow, in elements nor in bytes.
absl::Status CheckTimesWorld(const char* op, const char* which, const dist_buffer_t& buffer,
                             uint64_t world) {
  const uint64_t element = dist_dtype_size(buffer.dtype);
  uint64_t total = 0, bytes = 0;
  if (__builtin_mul_overflow(buffer.count, world, &total) ||
      (element != 0 && (__builtin_mul_overflow(total, element, &bytes) ||
                        bytes > static_cast<uint64_t>(PTRDIFF_MAX)))) {
    return Overflow(op, absl::StrCat(which, " count ", buffer.count, " x world size ", world,
                                     " is larger than any buffer can be"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckOpSizes(dist_collective_t kind, const dist_op_args_t& args, int32_t rank,
                          int32_t world_size) {
  const char* op = dist_collective_name(kind);
  if (args.timeout_ms > kMaxTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": timeout_ms ", args.timeout_ms,
                                                   " is longer than the most dist accepts (",
                                                   kMaxTimeoutMs, " ms, 30 days)"));
  }
  if (kind == DIST_COLL_BARRIER) return absl::OkStatus();
  // The buffers this rank uses, as ValidateOpArgs decides (an unused one may
  // hold anything).
  const bool is_root = args.root == rank;
  const bool uses_send = kind != DIST_COLL_RECV && !(kind == DIST_COLL_BROADCAST && !is_root) &&
                         !(kind == DIST_COLL_SCATTER && !is_root);
  const bool uses_recv = kind != DIST_COLL_SEND && !(kind == DIST_COLL_REDUCE && !is_root) &&
                         !(kind == DIST_COLL_GATHER && !is_root);
  if (uses_send) DIST_RETURN_IF_ERROR(CheckBufferBytes(op, "send", args.send));
  if (uses_recv) DIST_RETURN_IF_ERROR(CheckBufferBytes(op, "recv", args.recv));
  const uint64_t world = static_cast<uint64_t>(world_size);
  switch (kind) {
    case DIST_COLL_ALL_GATHER:
      return CheckTimesWorld(op, "send", args.send, world);
    case DIST_COLL_GATHER:
      return is_root ? CheckTimesWorld(op, "send", args.send, world) : absl::OkStatus();
    case DIST_COLL_SCATTER:
      return is_root ? CheckTimesWorld(op, "recv", args.recv, world) : absl::OkStatus();
    case DIST_COLL_REDUCE_SCATTER:
      return CheckTimesWorld(op, "recv", args.recv, world);
    default:
      return absl::OkStatus();
  }
}

}  // namespace dist

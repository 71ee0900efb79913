#include "validate.h"

#include "absl/strings/str_cat.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"

namespace dist_shm {
namespace {

class Checker {
 public:
  Checker(dist_collective_t collective, int rank, int world)
      : what_(dist_collective_name(collective)), rank_(rank), world_(world) {}

  // A buffer this rank uses: CPU, known dtype, data unless empty, and
  // `count` elements when count >= 0.
  absl::Status Buffer(const char* name, const dist_buffer_t& b, int64_t count) const {
    if (b.device.type == DIST_DEVICE_CUDA) {
      return absl::UnimplementedError(absl::StrCat(
          "shm: ", what_, " got a cuda:", b.device.index, " ", name,
          " buffer, but the shm backend moves CPU memory only; use nccl for CUDA "
          "buffers (DIST_BACKEND=cpu:shm,cuda:nccl)"));
    }
    if (b.device.type != DIST_DEVICE_CPU) {
      return absl::InvalidArgumentError(absl::StrCat("shm: ", what_, ": ", name,
                                                     " has unknown device type ",
                                                     static_cast<int>(b.device.type)));
    }
    if (dist_dtype_size(b.dtype) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shm: ", what_, ": ", name, " has unknown dtype ", static_cast<int>(b.dtype)));
    }
    if (count >= 0 && b.count != static_cast<uint64_t>(count)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shm: ", what_, ": ", name, ".count is ", b.count, " but must be ", count,
          " here (see the buffer shapes in dist/backend_plugin.h)"));
    }
    if (b.data == nullptr && b.count > 0) {
      return absl::InvalidArgumentError(absl::StrCat("shm: ", what_, ": ", name,
                                                     ".data is NULL with count ", b.count));
    }
    return absl::OkStatus();
  }

  absl::Status SameDtype(const dist_buffer_t& send, const dist_buffer_t& recv) const {
    if (send.dtype != recv.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shm: ", what_, ": send is ", dist_dtype_name(send.dtype), " but recv is ",
          dist_dtype_name(recv.dtype), "; both buffers must have the same dtype"));
    }
    return absl::OkStatus();
  }

  absl::Status Rank(const char* name, int32_t value) const {
    if (value < 0 || value >= world_) {
      return absl::InvalidArgumentError(absl::StrCat("shm: ", what_, ": ", name, " ", value,
                                                     " is outside [0, ", world_, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status Op(dist_dtype_t dtype, dist_reduce_op_t op) const {
    absl::Status status = dist::ValidateReduceOp(dtype, op);
    if (status.ok()) return status;
    return absl::Status(status.code(), absl::StrCat("shm: ", what_, ": ", status.message()));
  }

 private:
  const char* what_;
  int rank_;
  int world_;
};

}  // namespace

absl::Status ValidateOp(dist_collective_t collective, const dist_op_args_t& a, int rank,
                        int world) {
  const Checker check(collective, rank, world);
  const int64_t w = world;
  switch (collective) {
    case DIST_COLL_ALL_REDUCE:
      DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, -1));
      DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, a.send.count));
      DIST_RETURN_IF_ERROR(check.SameDtype(a.send, a.recv));
      return check.Op(a.send.dtype, a.op);
    case DIST_COLL_REDUCE:
      DIST_RETURN_IF_ERROR(check.Rank("root", a.root));
      DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, -1));
      if (rank == a.root) {
        DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, a.send.count));
        DIST_RETURN_IF_ERROR(check.SameDtype(a.send, a.recv));
      }
      return check.Op(a.send.dtype, a.op);
    case DIST_COLL_BROADCAST:
      DIST_RETURN_IF_ERROR(check.Rank("root", a.root));
      DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, -1));
      if (rank == a.root && a.send.data != nullptr && a.send.data != a.recv.data) {
        DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, a.recv.count));
        DIST_RETURN_IF_ERROR(check.SameDtype(a.send, a.recv));
      }
      return absl::OkStatus();
    case DIST_COLL_ALL_GATHER:
      DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, -1));
      DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, a.send.count * w));
      return check.SameDtype(a.send, a.recv);
    case DIST_COLL_GATHER:
      DIST_RETURN_IF_ERROR(check.Rank("root", a.root));
      DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, -1));
      if (rank == a.root) {
        DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, a.send.count * w));
        DIST_RETURN_IF_ERROR(check.SameDtype(a.send, a.recv));
      }
      return absl::OkStatus();
    case DIST_COLL_SCATTER:
      DIST_RETURN_IF_ERROR(check.Rank("root", a.root));
      DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, -1));
      if (rank == a.root) {
        DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, a.recv.count * w));
        DIST_RETURN_IF_ERROR(check.SameDtype(a.send, a.recv));
      }
      return absl::OkStatus();
    case DIST_COLL_REDUCE_SCATTER:
      DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, -1));
      DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, a.recv.count * w));
      DIST_RETURN_IF_ERROR(check.SameDtype(a.send, a.recv));
      return check.Op(a.recv.dtype, a.op);
    case DIST_COLL_ALL_TO_ALL:
      DIST_RETURN_IF_ERROR(check.Buffer("send", a.send, -1));
      DIST_RETURN_IF_ERROR(check.Buffer("recv", a.recv, a.send.count));
      DIST_RETURN_IF_ERROR(check.SameDtype(a.send, a.recv));
      if (a.send.count % w != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shm: all_to_all: send.count ", a.send.count,
            " is not a multiple of the world size ", world));
      }
      return absl::OkStatus();
    case DIST_COLL_BARRIER:
      return absl::OkStatus();
    case DIST_COLL_SEND:
    case DIST_COLL_RECV: {
      const bool send = collective == DIST_COLL_SEND;
      DIST_RETURN_IF_ERROR(check.Rank("peer", a.peer));
      if (a.peer == rank) {
        return absl::InvalidArgumentError(absl::StrCat(
            "shm: ", dist_collective_name(collective), ": peer ", a.peer,
            " is this rank; send/recv need another rank"));
      }
      return check.Buffer(send ? "send" : "recv", send ? a.send : a.recv, -1);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("shm: unknown operation ", static_cast<int>(collective)));
  }
}

}  // namespace dist_shm

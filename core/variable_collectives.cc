// dist_all_to_all_v, dist_all_gather_v and dist_reduce_scatter_v: the
// collectives with a count per rank. A backend that runs them itself (its
// table's run_v, backend ABI 1.5: mpi's MPI_Ialltoallv, MPI_Iallgatherv and
// MPI_Ireduce_scatter) gets them; for the others the core builds them from
// operations every backend has, so that every backend offers them.
//  - all_to_all_v and all_gather_v: W-1 rounds of sendrecv (round s: send
//    to rank+s, receive from rank-s), on a group of the same ranks kept for
//    them (so no tag of the caller's can match), plus one local copy;
//  - reduce_scatter_v: one all_reduce of the whole buffer, then this rank's
//    block (the backend's fastest reduction, at the price of W-1 extra
//    blocks of traffic).
// Host memory only in this version: the local copy and the staging buffer
// are memcpy.
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/process_group.h"

namespace dist {
namespace {

// A block of `buffer`: `count` elements from element `offset`.
dist_buffer_t Block(const dist_buffer_t& buffer, uint64_t offset, uint64_t count) {
  dist_buffer_t block = buffer;
  block.data = count == 0
                   ? buffer.data
                   : static_cast<char*>(buffer.data) + offset * dist_dtype_size(buffer.dtype);
  block.count = count;
  return block;
}

// Packed displacements (rank order) when `displs` is NULL.
std::vector<uint64_t> Displacements(const uint64_t* counts, const uint64_t* displs, int world) {
  std::vector<uint64_t> out(world);
  uint64_t offset = 0;
  for (int r = 0; r < world; ++r) {
    out[r] = displs != nullptr ? displs[r] : offset;
    offset += counts[r];
  }
  return out;
}

absl::Status CheckBlocks(const char* op, const char* which, const dist_buffer_t& buffer,
                         const uint64_t* counts, const std::vector<uint64_t>& displs, int world) {
  if (counts == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", which, "_counts is NULL"));
  }
  for (int r = 0; r < world; ++r) {
    if (displs[r] > buffer.count || counts[r] > buffer.count - displs[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": ", which, " block of rank ", r, " (", counts[r], " elements at ", displs[r],
          ") ends past the ", which, " buffer's ", buffer.count, " elements"));
    }
  }
  if (buffer.data == nullptr && std::accumulate(counts, counts + world, uint64_t{0}) > 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the ", which, " buffer is NULL"));
  }
  return absl::OkStatus();
}

// Whether both buffers are host memory: the core's own fallbacks copy
// blocks with the CPU, so device buffers need a backend's run_v.
bool OnHost(const dist_buffer_t& send, const dist_buffer_t& recv) {
  return send.device.type == DIST_DEVICE_CPU && recv.device.type == DIST_DEVICE_CPU;
}

absl::Status DeviceNeedsBackend(const char* op) {
  return absl::UnimplementedError(
      absl::StrCat(op,
                   " on device buffers needs a backend that runs it natively (nccl does), and the "
                   "group's backend for this device does not; use host buffers, the fixed-count "
                   "collective or send/recv"));
}

absl::Status CheckDtypes(const char* op, const dist_buffer_t& send, const dist_buffer_t& recv) {
  if (send.dtype != recv.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": send is ", dist_dtype_name(send.dtype),
                                                   " but recv is ", dist_dtype_name(recv.dtype)));
  }
  return absl::OkStatus();
}

// The arguments of a variable-count collective's whole buffers (run_v, and
// the core's own all_reduce for reduce_scatter_v).
dist_op_args_t WholeBuffers(const dist_buffer_t& send, const dist_buffer_t& recv,
                            dist_reduce_op_t op = DIST_SUM) {
  dist_op_args_t args{};
  args.struct_size = sizeof(args);
  args.send = send;
  args.recv = recv;
  args.op = op;
  return args;
}

}  // namespace

std::optional<absl::Status> ProcessGroup::RunVariableOnBackend(const char* op,
                                                               dist_collective_t kind,
                                                               const dist_op_args_t& args,
                                                               const dist_op_counts_t& counts) {
  absl::StatusOr<const BackendComm*> comm = CommFor(kind, args);
  if (!comm.ok()) return comm.status();
  // The record is a zero-filled copy of the table: NULL past an older
  // plugin's struct_size.
  const dist_backend_plugin_t& table = (*comm)->plugin->backend;
  if (table.run_v == nullptr) return std::nullopt;
  absl::Status status = TakeError(table.run_v((*comm)->comm, kind, &args, &counts, timeout_ms_));
  if (status.ok()) return status;
  if (absl::IsUnimplemented(status)) return std::nullopt;  // the same on every rank
  status = RevokedOr(absl::Status(status.code(), absl::StrCat(op, ": ", status.message())));
  return FailBlocking(op, std::move(status), {});
}

absl::StatusOr<ProcessGroup*> ProcessGroup::VariableCountGroup() {
  absl::MutexLock lock(&variable_count_mu_);
  if (variable_count_group_ == nullptr) {
    std::vector<int32_t> everyone(world_size_);
    std::iota(everyone.begin(), everyone.end(), 0);
    absl::StatusOr<std::unique_ptr<ProcessGroup>> made =
        MakeChild(everyone, absl::StrCat(name_, ".v"), absl::StrCat(store_prefix_, "v/"),
                  /*may_split=*/true, timeout_);
    if (!made.ok()) return made.status();
    variable_count_group_ = *std::move(made);
  }
  return variable_count_group_.get();
}

absl::Status ProcessGroup::AllToAllV(const dist_buffer_t& send, const uint64_t* send_counts,
                                     const uint64_t* send_displs, const dist_buffer_t& recv,
                                     const uint64_t* recv_counts, const uint64_t* recv_displs,
                                     const char* op) {
  if (rank_ < 0) return NotMemberError();
  DIST_RETURN_IF_ERROR(CheckDtypes(op, send, recv));
  if (send_counts == nullptr || recv_counts == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": the counts are NULL"));
  }
  const std::vector<uint64_t> sd = Displacements(send_counts, send_displs, world_size_);
  const std::vector<uint64_t> rd = Displacements(recv_counts, recv_displs, world_size_);
  DIST_RETURN_IF_ERROR(CheckBlocks(op, "send", send, send_counts, sd, world_size_));
  DIST_RETURN_IF_ERROR(CheckBlocks(op, "recv", recv, recv_counts, rd, world_size_));
  if (send_counts[rank_] != recv_counts[rank_]) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": rank ", rank_, " sends itself ",
                                                   send_counts[rank_], " elements but expects ",
                                                   recv_counts[rank_], " from itself"));
  }
  const dist_op_args_t args = WholeBuffers(send, recv);
  const dist_op_counts_t counts{sizeof(dist_op_counts_t), send_counts, sd.data(), recv_counts,
                                rd.data()};
  if (std::optional<absl::Status> done =
          RunVariableOnBackend(op, DIST_COLL_ALL_TO_ALL, args, counts)) {
    return *done;
  }
  if (!OnHost(send, recv)) return DeviceNeedsBackend(op);
  if (send_counts[rank_] > 0) {  // this rank's own block
    std::memmove(Block(recv, rd[rank_], send_counts[rank_]).data,
                 Block(send, sd[rank_], send_counts[rank_]).data,
                 send_counts[rank_] * dist_dtype_size(send.dtype));
  }
  if (world_size_ == 1) return absl::OkStatus();
  absl::StatusOr<ProcessGroup*> pairs = VariableCountGroup();
  if (!pairs.ok()) {
    return absl::Status(pairs.status().code(),
                        absl::StrCat(op,
                                     ": setting up the group its exchanges run on (every rank "
                                     "must call it): ",
                                     pairs.status().message()));
  }
  for (int step = 1; step < world_size_; ++step) {
    const int dst = (rank_ + step) % world_size_;
    const int src = (rank_ - step + world_size_) % world_size_;
    dist_op_args_t send_args{};
    send_args.struct_size = sizeof(send_args);
    send_args.send = Block(send, sd[dst], send_counts[dst]);
    send_args.peer = dst;
    dist_op_args_t recv_args{};
    recv_args.struct_size = sizeof(recv_args);
    recv_args.recv = Block(recv, rd[src], recv_counts[src]);
    recv_args.peer = src;
    absl::Status status = (*pairs)->RunSendRecv(send_args, recv_args);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(op, " (exchange with ranks ", dst, " and ",
                                                      src, "): ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ProcessGroup::AllGatherV(const dist_buffer_t& send, const dist_buffer_t& recv,
                                      const uint64_t* recv_counts, const uint64_t* recv_displs) {
  if (rank_ < 0) return NotMemberError();
  if (recv_counts == nullptr) {
    return absl::InvalidArgumentError("all_gather_v: recv_counts is NULL");
  }
  if (send.count != recv_counts[rank_]) {
    return absl::InvalidArgumentError(absl::StrCat("all_gather_v: send has ", send.count,
                                                   " elements but recv_counts[", rank_, "] is ",
                                                   recv_counts[rank_]));
  }
  DIST_RETURN_IF_ERROR(CheckDtypes("all_gather_v", send, recv));
  const std::vector<uint64_t> rd = Displacements(recv_counts, recv_displs, world_size_);
  DIST_RETURN_IF_ERROR(CheckBlocks("all_gather_v", "recv", recv, recv_counts, rd, world_size_));
  const dist_op_args_t args = WholeBuffers(send, recv);
  const dist_op_counts_t counts{sizeof(dist_op_counts_t), nullptr, nullptr, recv_counts, rd.data()};
  if (std::optional<absl::Status> done =
          RunVariableOnBackend("all_gather_v", DIST_COLL_ALL_GATHER, args, counts)) {
    return *done;
  }
  if (!OnHost(send, recv)) return DeviceNeedsBackend("all_gather_v");
  // Else every rank sends every other this rank's whole buffer.
  const std::vector<uint64_t> send_counts(world_size_, send.count);
  const std::vector<uint64_t> send_displs(world_size_, 0);
  return AllToAllV(send, send_counts.data(), send_displs.data(), recv, recv_counts, recv_displs,
                   "all_gather_v");
}

absl::Status ProcessGroup::ReduceScatterV(const dist_buffer_t& send, const dist_buffer_t& recv,
                                          const uint64_t* recv_counts, dist_reduce_op_t op) {
  if (rank_ < 0) return NotMemberError();
  DIST_RETURN_IF_ERROR(CheckDtypes("reduce_scatter_v", send, recv));
  if (recv_counts == nullptr) {
    return absl::InvalidArgumentError("reduce_scatter_v: recv_counts is NULL");
  }
  const uint64_t total = std::accumulate(recv_counts, recv_counts + world_size_, uint64_t{0});
  if (send.count != total || recv.count != recv_counts[rank_]) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce_scatter_v: send must hold the sum of recv_counts (", total,
                     " elements, has ", send.count, ") and recv this rank's count (",
                     recv_counts[rank_], ", has ", recv.count, ")"));
  }
  const std::vector<uint64_t> packed = Displacements(recv_counts, nullptr, world_size_);
  const dist_op_args_t native = WholeBuffers(send, recv, op);
  const dist_op_counts_t counts{sizeof(dist_op_counts_t), nullptr, nullptr, recv_counts,
                                packed.data()};
  if (std::optional<absl::Status> done =
          RunVariableOnBackend("reduce_scatter_v", DIST_COLL_REDUCE_SCATTER, native, counts)) {
    return *done;
  }
  if (!OnHost(send, recv)) return DeviceNeedsBackend("reduce_scatter_v");
  const size_t element = dist_dtype_size(send.dtype);
  std::vector<char> staging(total * element);
  if (total > 0) std::memcpy(staging.data(), send.data, staging.size());
  dist_buffer_t staged = send;
  staged.data = staging.data();
  absl::Status status = Run(DIST_COLL_ALL_REDUCE, WholeBuffers(staged, staged, op));
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("reduce_scatter_v: ", status.message()));
  }
  const uint64_t offset = std::accumulate(recv_counts, recv_counts + rank_, uint64_t{0});
  if (recv.count > 0) {
    std::memcpy(recv.data, staging.data() + offset * element, recv.count * element);
  }
  return absl::OkStatus();
}

}  // namespace dist

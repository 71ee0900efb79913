#include "ops.h"

#include <climits>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "datatypes.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "nbc_tuning.h"
#include "recursive_doubling_all_reduce.h"
#include "ring_all_gather.h"
#include "runtime.h"

namespace dist_mpi {
namespace {

// Context for argument errors: "mpi: all_reduce on rank 1 of 4: ...".
class Checker {
 public:
  Checker(const Comm& comm, dist_collective_t kind) : comm_(comm), kind_(kind) {}

  absl::Status Error(absl::StatusCode code, const std::string& what) const {
    return absl::Status(code, absl::StrCat("mpi: ", dist_collective_name(kind_), " on rank ",
                                           comm_.rank(), " of ", comm_.size(), ": ", what));
  }
  absl::Status Invalid(const std::string& what) const {
    return Error(absl::StatusCode::kInvalidArgument, what);
  }

  // A buffer the op uses on this rank: what MPI adds to the common checks of
  // dist/cpp/validate.hpp, which the plugin adapter made before.
  absl::Status Buffer(const char* which, const dist_buffer_t& buffer) const {
    if (buffer.count > static_cast<uint64_t>(INT_MAX)) {
      return Error(absl::StatusCode::kOutOfRange,
                   absl::StrCat(which, " has ", buffer.count,
                                " elements, above MPI's int count limit (2^31-1); split it"));
    }
    if (buffer.device.type == DIST_DEVICE_CUDA) {
      if (!Runtime::Get().cuda_aware()) {
        return Error(absl::StatusCode::kUnimplemented,
                     absl::StrCat(which, " is on cuda:", buffer.device.index,
                                  " but this Open MPI is not CUDA-aware "
                                  "(MPIX_Query_cuda_support() = 0); use the nccl backend for "
                                  "CUDA buffers (DIST_BACKEND=cpu:mpi,cuda:nccl)"));
      }
      if (buffer.stream != nullptr) {
        return Error(absl::StatusCode::kUnimplemented,
                     absl::StrCat(which,
                                  " names a CUDA stream, which MPI cannot order on; "
                                  "synchronize it and pass stream=NULL, or use nccl"));
      }
    }
    return absl::OkStatus();
  }

  // Reductions on CUDA buffers cannot take the host-side parts (avg's
  // division, float16/bfloat16 ops).
  absl::Status Reduction(dist_dtype_t dtype, dist_reduce_op_t op, bool on_cuda) const {
    if (on_cuda && (op == DIST_AVG || dtype == DIST_FLOAT16 || dtype == DIST_BFLOAT16)) {
      return Error(absl::StatusCode::kUnimplemented,
                   absl::StrCat(dist_reduce_op_name(op), " on ", dist_dtype_name(dtype),
                                " CUDA buffers needs host-side work; use the nccl backend"));
    }
    return absl::OkStatus();
  }

  absl::Status NoCudaCopy(const dist_buffer_t& buffer, const char* why) const {
    if (buffer.device.type != DIST_DEVICE_CUDA) return absl::OkStatus();
    return Error(absl::StatusCode::kUnimplemented,
                 absl::StrCat(why, " needs a host copy of a CUDA buffer; use the nccl backend"));
  }

 private:
  const Comm& comm_;
  const dist_collective_t kind_;
};

bool OnCuda(const dist_buffer_t& a, const dist_buffer_t& b) {
  return a.device.type == DIST_DEVICE_CUDA || b.device.type == DIST_DEVICE_CUDA;
}

size_t Bytes(const dist_buffer_t& buffer, uint64_t count) {
  return static_cast<size_t>(count) * dist_dtype_size(buffer.dtype);
}

char* At(const dist_buffer_t& buffer, uint64_t element) {
  return static_cast<char*>(buffer.data) + Bytes(buffer, element);
}

// True when [a, a+a_bytes) and [b, b+b_bytes) share a byte.
bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  if (a == nullptr || b == nullptr || a_bytes == 0 || b_bytes == 0) return false;
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

std::shared_ptr<PendingOp> NewOp(dist_collective_t kind, const dist_op_args_t& args, uint64_t count,
                                 dist_dtype_t dtype) {
  auto op = std::make_shared<PendingOp>();
  op->kind = kind;
  op->count = count;
  op->dtype = dtype;
  op->timeout = args.timeout_ms > 0 ? absl::Milliseconds(args.timeout_ms) : absl::ZeroDuration();
  return op;
}

OpResult IssueOp(Comm& comm, std::shared_ptr<PendingOp> op) {
  if (absl::Status s = comm.Issue(op); !s.ok()) return s;
  return op;
}

// For avg: divide once all ranks' contributions are summed.
std::function<absl::Status(const MPI_Status&)> Average(void* data, uint64_t count,
                                                       dist_dtype_t dtype, int ranks) {
  return [=](const MPI_Status&) {
    dist::FinishAverage(dtype, data, static_cast<size_t>(count), ranks);
    return absl::OkStatus();
  };
}

}  // namespace

OpResult IssueAllReduce(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_ALL_REDUCE);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  DIST_RETURN_IF_ERROR(check.Reduction(send.dtype, args.op, OnCuda(send, recv)));
  auto op = NewOp(DIST_COLL_ALL_REDUCE, args, send.count, send.dtype);
  const size_t bytes = Bytes(send, send.count);
  const bool in_place = send.data == recv.data;
  if (args.op == DIST_AVG)
    op->on_complete = Average(recv.data, recv.count, recv.dtype, comm.size());
  const void* send_data = in_place ? MPI_IN_PLACE : send.data;
  void* recv_data = recv.data;
  const int count = static_cast<int>(send.count);
  const MPI_Datatype type = MpiDatatype(send.dtype);
  const MPI_Op mpi_op = MpiReduceOp(send.dtype, args.op);
  const MPI_Comm mpi_comm = comm.mpi_comm();
  const int size = comm.size();
  if (!OnCuda(send, recv) && RecursiveDoublingAllReduce::Serves(bytes, size)) {
    // See recursive_doubling_all_reduce.h for why not MPI_Iallreduce here.
    op->schedule = std::make_unique<RecursiveDoublingAllReduce>(
        send.data, recv.data, count, type, mpi_op, bytes, comm.rank(), size, comm.p2p_comm());
    return IssueOp(comm, std::move(op));
  }
  op->start = [=](MPI_Request* request) {
    return NbcTuning::Get().Iallreduce(send_data, recv_data, count, type, mpi_op, mpi_comm, size,
                                       bytes, request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueBroadcast(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_BROADCAST);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  const bool root = comm.rank() == args.root;
  // The root may pass only send (recv NULL): it broadcasts from send.
  const bool from_send_only = root && recv.data == nullptr && send.data != nullptr;
  const dist_buffer_t& buffer = from_send_only ? send : recv;
  DIST_RETURN_IF_ERROR(check.Buffer(from_send_only ? "send" : "recv", buffer));
  const size_t bytes = Bytes(buffer, buffer.count);
  const bool copy = root && !from_send_only && send.data != nullptr && send.data != recv.data;
  if (copy) {
    DIST_RETURN_IF_ERROR(check.Buffer("send", send));
    DIST_RETURN_IF_ERROR(check.NoCudaCopy(recv, "broadcast from a separate send buffer"));
  }
  auto op = NewOp(DIST_COLL_BROADCAST, args, buffer.count, buffer.dtype);
  void* data = buffer.data;
  const void* source = copy ? send.data : nullptr;
  const int count = static_cast<int>(buffer.count);
  const MPI_Datatype type = MpiDatatype(buffer.dtype);
  const int root_rank = args.root;
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) {
    if (source != nullptr && bytes > 0) std::memcpy(data, source, bytes);
    return MPI_Ibcast(data, count, type, root_rank, mpi_comm, request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueReduce(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_REDUCE);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  const bool root = comm.rank() == args.root;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  if (root) {
    DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  }
  DIST_RETURN_IF_ERROR(check.Reduction(send.dtype, args.op, OnCuda(send, root ? recv : send)));
  auto op = NewOp(DIST_COLL_REDUCE, args, send.count, send.dtype);
  const size_t bytes = Bytes(send, send.count);
  const bool in_place = root && send.data == recv.data;
  if (root) {
    if (args.op == DIST_AVG)
      op->on_complete = Average(recv.data, recv.count, recv.dtype, comm.size());
  }
  const void* send_data = in_place ? MPI_IN_PLACE : send.data;
  void* recv_data = root ? recv.data : nullptr;
  const int count = static_cast<int>(send.count);
  const MPI_Datatype type = MpiDatatype(send.dtype);
  const MPI_Op mpi_op = MpiReduceOp(send.dtype, args.op);
  const int root_rank = args.root;
  const MPI_Comm mpi_comm = comm.mpi_comm();
  const int size = comm.size();
  op->start = [=](MPI_Request* request) {
    return NbcTuning::Get().Ireduce(send_data, recv_data, count, type, mpi_op, root_rank, mpi_comm,
                                    size, bytes, request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueAllGather(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_ALL_GATHER);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  const uint64_t n = send.count;
  const size_t block = Bytes(send, n);
  // Any other overlap was refused (dist/cpp/validate.hpp, CheckOverlap).
  const bool in_place = n > 0 && send.data == At(recv, n * comm.rank());
  auto op = NewOp(DIST_COLL_ALL_GATHER, args, n, send.dtype);
  const int count = static_cast<int>(n);
  const MPI_Datatype type = MpiDatatype(send.dtype);
  if (!OnCuda(send, recv)) {
    // See ring_all_gather.h for why not MPI_Iallgather.
    op->schedule = std::make_unique<RingAllGather>(send.data, recv.data, count, type, block,
                                                   comm.rank(), comm.size(), comm.p2p_comm());
    return IssueOp(comm, std::move(op));
  }
  // CUDA-aware MPI: the ring's local copy would be a host memcpy.
  const void* send_data = in_place ? MPI_IN_PLACE : send.data;
  void* recv_data = recv.data;
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) {
    return MPI_Iallgather(send_data, count, type, recv_data, count, type, mpi_comm, request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueGather(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_GATHER);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  const bool root = comm.rank() == args.root;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  const uint64_t n = send.count;
  // send and recv are disjoint (dist/cpp/validate.hpp, CheckOverlap).
  if (root) DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  auto op = NewOp(DIST_COLL_GATHER, args, n, send.dtype);
  const void* send_data = send.data;
  void* recv_data = root ? recv.data : nullptr;
  const int count = static_cast<int>(n);
  const MPI_Datatype type = MpiDatatype(send.dtype);
  const int root_rank = args.root;
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) {
    return MPI_Igather(send_data, count, type, recv_data, count, type, root_rank, mpi_comm,
                       request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueScatter(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_SCATTER);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  const bool root = comm.rank() == args.root;
  DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  const uint64_t n = recv.count;
  // send and recv are disjoint (dist/cpp/validate.hpp, CheckOverlap).
  if (root) DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  auto op = NewOp(DIST_COLL_SCATTER, args, n, recv.dtype);
  const void* send_data = root ? send.data : nullptr;
  void* recv_data = recv.data;
  const int count = static_cast<int>(n);
  const MPI_Datatype type = MpiDatatype(recv.dtype);
  const int root_rank = args.root;
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) {
    return MPI_Iscatter(send_data, count, type, recv_data, count, type, root_rank, mpi_comm,
                        request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueReduceScatter(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_REDUCE_SCATTER);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  const uint64_t n = recv.count;
  DIST_RETURN_IF_ERROR(check.Reduction(send.dtype, args.op, OnCuda(send, recv)));
  const size_t block = Bytes(recv, n);
  // recv inside send (NCCL's in-place layout; any other overlap was
  // refused): reduce into scratch, copy out at the end.
  const bool via_scratch = Overlap(send.data, block * comm.size(), recv.data, block);
  if (via_scratch)
    DIST_RETURN_IF_ERROR(check.NoCudaCopy(recv, "reduce_scatter with overlapping buffers"));
  auto op = NewOp(DIST_COLL_REDUCE_SCATTER, args, n, recv.dtype);
  void* target = recv.data;
  const dist_dtype_t dtype = recv.dtype;
  const bool average = args.op == DIST_AVG;
  const int ranks = comm.size();
  void* recv_data = recv.data;
  if (via_scratch) {
    op->scratch.resize(block);
    recv_data = op->scratch.data();
  }
  PendingOp* raw = op.get();
  op->on_complete = [=](const MPI_Status&) {
    if (via_scratch) std::memcpy(target, raw->scratch.data(), block);
    if (average) dist::FinishAverage(dtype, target, static_cast<size_t>(n), ranks);
    return absl::OkStatus();
  };
  const void* send_data = send.data;
  const int count = static_cast<int>(n);
  const MPI_Datatype type = MpiDatatype(dtype);
  const MPI_Op mpi_op = MpiReduceOp(dtype, args.op);
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) {
    return MPI_Ireduce_scatter_block(send_data, recv_data, count, type, mpi_op, mpi_comm, request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueAllToAll(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_ALL_TO_ALL);
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  const uint64_t n = send.count / comm.size();
  // send and recv are disjoint (dist/cpp/validate.hpp, CheckOverlap).
  auto op = NewOp(DIST_COLL_ALL_TO_ALL, args, n, send.dtype);
  const void* send_data = send.data;
  void* recv_data = recv.data;
  const int count = static_cast<int>(n);
  const MPI_Datatype type = MpiDatatype(send.dtype);
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) {
    return MPI_Ialltoall(send_data, count, type, recv_data, count, type, mpi_comm, request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueBarrier(Comm& comm, const dist_op_args_t& args) {
  auto op = NewOp(DIST_COLL_BARRIER, args, 0, DIST_UINT8);
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) { return MPI_Ibarrier(mpi_comm, request); };
  return IssueOp(comm, std::move(op));
}

namespace {

// MPI's tag range (the adapter checked the peer).
absl::Status CheckTag(const Checker& check, const dist_op_args_t& args) {
  int* tag_ub = nullptr;
  int found = 0;
  {
    MpiCallGuard guard;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  }
  const int64_t max_tag = found && tag_ub != nullptr ? *tag_ub : 32767;
  if (args.tag < 0 || args.tag > max_tag) {
    return check.Invalid(
        absl::StrCat("tag ", args.tag, " is outside MPI's tag range 0..", max_tag));
  }
  return absl::OkStatus();
}

}  // namespace

OpResult IssueSend(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_SEND);
  DIST_RETURN_IF_ERROR(CheckTag(check, args));
  const dist_buffer_t& send = args.send;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  auto op = NewOp(DIST_COLL_SEND, args, send.count, send.dtype);
  op->peer = args.peer;
  op->tag = args.tag;
  const void* data = send.data;
  const int count = static_cast<int>(send.count);
  const MPI_Datatype type = MpiDatatype(send.dtype);
  const int peer = args.peer;
  const int tag = static_cast<int>(args.tag);
  const MPI_Comm mpi_comm = comm.mpi_comm();
  op->start = [=](MPI_Request* request) {
    return MPI_Isend(data, count, type, peer, tag, mpi_comm, request);
  };
  return IssueOp(comm, std::move(op));
}

OpResult IssueRecv(Comm& comm, const dist_op_args_t& args) {
  const Checker check(comm, DIST_COLL_RECV);
  DIST_RETURN_IF_ERROR(CheckTag(check, args));
  const dist_buffer_t& recv = args.recv;
  DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  auto op = NewOp(DIST_COLL_RECV, args, recv.count, recv.dtype);
  op->peer = args.peer;
  op->tag = args.tag;
  void* data = recv.data;
  const int count = static_cast<int>(recv.count);
  const MPI_Datatype type = MpiDatatype(recv.dtype);
  const int peer = args.peer;
  const int tag = static_cast<int>(args.tag);
  const MPI_Comm mpi_comm = comm.mpi_comm();
  const std::string where =
      absl::StrCat("mpi: recv from rank ", peer, " tag ", tag, " on rank ", comm.rank(), ": ");
  op->on_complete = [=](const MPI_Status& status) {
    int received = 0;
    MPI_Get_count(&status, type, &received);
    if (received != count) {
      return absl::InvalidArgumentError(absl::StrCat(where, "got ", received,
                                                     " elements but expected ", count,
                                                     "; send and recv counts must match"));
    }
    return absl::OkStatus();
  };
  op->start = [=](MPI_Request* request) {
    return MPI_Irecv(data, count, type, peer, tag, mpi_comm, request);
  };
  return IssueOp(comm, std::move(op));
}

namespace {

// Counts and displacements as MPI's int arrays, kept by the op until MPI is
// done with them (a non-blocking collective reads them until completion).
struct IntCounts {
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

absl::Status ToInts(const Checker& check, const char* which, const uint64_t* values, int n,
                    std::vector<int>* out) {
  out->resize(n);
  for (int r = 0; r < n; ++r) {
    if (values[r] > static_cast<uint64_t>(INT_MAX)) {
      return check.Error(absl::StatusCode::kOutOfRange,
                         absl::StrCat(which, "[", r, "] is ", values[r],
                                      ", above MPI's int count limit (2^31-1); split it"));
    }
    (*out)[r] = static_cast<int>(values[r]);
  }
  return absl::OkStatus();
}

}  // namespace

OpResult IssueVariable(dist_collective_t kind, Comm& comm, const dist_op_args_t& args,
                       const dist_op_counts_t& counts) {
  const Checker check(comm, kind);
  const int n = comm.size();
  auto ints = std::make_shared<IntCounts>();
  if (kind == DIST_COLL_ALL_TO_ALL) {
    DIST_RETURN_IF_ERROR(ToInts(check, "send_counts", counts.send_counts, n, &ints->send_counts));
    DIST_RETURN_IF_ERROR(ToInts(check, "send_displs", counts.send_displs, n, &ints->send_displs));
  }
  DIST_RETURN_IF_ERROR(ToInts(check, "recv_counts", counts.recv_counts, n, &ints->recv_counts));
  DIST_RETURN_IF_ERROR(ToInts(check, "recv_displs", counts.recv_displs, n, &ints->recv_displs));
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  DIST_RETURN_IF_ERROR(check.Buffer("send", send));
  DIST_RETURN_IF_ERROR(check.Buffer("recv", recv));
  if (kind == DIST_COLL_REDUCE_SCATTER) {
    DIST_RETURN_IF_ERROR(check.Reduction(send.dtype, args.op, OnCuda(send, recv)));
  }
  auto op = NewOp(kind, args, recv.count, recv.dtype);
  const size_t send_bytes = Bytes(send, send.count);
  const size_t recv_bytes = Bytes(recv, recv.count);
  // The core does not ask the host for disjoint buffers here: where they
  // share memory, MPI reads a copy of send taken now.
  const void* send_data = send.data;
  if (Overlap(send.data, send_bytes, recv.data, recv_bytes)) {
    DIST_RETURN_IF_ERROR(check.NoCudaCopy(send, "overlapping buffers"));
    op->scratch.assign(static_cast<const unsigned char*>(send.data),
                       static_cast<const unsigned char*>(send.data) + send_bytes);
    send_data = op->scratch.data();
  }
  void* recv_data = recv.data;
  const MPI_Datatype type = MpiDatatype(recv.dtype);
  const MPI_Comm mpi_comm = comm.mpi_comm();
  const IntCounts* c = ints.get();
  switch (kind) {
    case DIST_COLL_ALL_TO_ALL:
      op->start = [=](MPI_Request* request) {
        return MPI_Ialltoallv(send_data, c->send_counts.data(), c->send_displs.data(), type,
                              recv_data, c->recv_counts.data(), c->recv_displs.data(), type,
                              mpi_comm, request);
      };
      break;
    case DIST_COLL_ALL_GATHER: {
      const int count = static_cast<int>(send.count);
      op->start = [=](MPI_Request* request) {
        return MPI_Iallgatherv(send_data, count, type, recv_data, c->recv_counts.data(),
                               c->recv_displs.data(), type, mpi_comm, request);
      };
      break;
    }
    case DIST_COLL_REDUCE_SCATTER: {
      const MPI_Op mpi_op = MpiReduceOp(recv.dtype, args.op);
      if (args.op == DIST_AVG) op->on_complete = Average(recv_data, recv.count, recv.dtype, n);
      op->start = [=](MPI_Request* request) {
        return MPI_Ireduce_scatter(send_data, recv_data, c->recv_counts.data(), type, mpi_op,
                                   mpi_comm, request);
      };
      break;
    }
    default:
      return absl::UnimplementedError("the core builds this variable-count collective");
  }
  // The lambda holds the raw pointer; the op keeps the arrays alive.
  op->keep_alive = std::move(ints);
  return IssueOp(comm, std::move(op));
}

OpResult Issue(dist_collective_t kind, Comm& comm, const dist_op_args_t& args) {
  switch (kind) {
    case DIST_COLL_ALL_REDUCE:
      return IssueAllReduce(comm, args);
    case DIST_COLL_BROADCAST:
      return IssueBroadcast(comm, args);
    case DIST_COLL_REDUCE:
      return IssueReduce(comm, args);
    case DIST_COLL_ALL_GATHER:
      return IssueAllGather(comm, args);
    case DIST_COLL_GATHER:
      return IssueGather(comm, args);
    case DIST_COLL_SCATTER:
      return IssueScatter(comm, args);
    case DIST_COLL_REDUCE_SCATTER:
      return IssueReduceScatter(comm, args);
    case DIST_COLL_ALL_TO_ALL:
      return IssueAllToAll(comm, args);
    case DIST_COLL_BARRIER:
      return IssueBarrier(comm, args);
    case DIST_COLL_SEND:
      return IssueSend(comm, args);
    case DIST_COLL_RECV:
      return IssueRecv(comm, args);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("mpi: unknown operation ", static_cast<int>(kind)));
  }
}

}  // namespace dist_mpi

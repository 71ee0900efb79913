// Raw NCCL: one communicator over the group's ranks (the unique id travels
// through the group itself), the nccl* call matching each operation on a
// stream of its own, and nccl-tests' grouped send/recv for the operations
// NCCL has no collective for (gather, scatter, all_to_all, sendrecv).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tools/distbench/baseline.h"
#include "tools/distbench/group_util.h"

namespace distbench {
namespace {

absl::Status Nccl(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("raw NCCL ", what, ": ", ncclGetErrorString(result)));
}

absl::Status Cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

#define DIST_CHECK(expr)                           \
  do {                                             \
    absl::Status check_status_ = (expr);           \
    if (!check_status_.ok()) return check_status_; \
  } while (0)

absl::StatusOr<ncclDataType_t> NcclType(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_INT8:
      return ncclInt8;
    case DIST_UINT8:
      return ncclUint8;
    case DIST_INT32:
      return ncclInt32;
    case DIST_INT64:
      return ncclInt64;
    case DIST_FLOAT16:
      return ncclFloat16;
    case DIST_BFLOAT16:
      return ncclBfloat16;
    case DIST_FLOAT32:
      return ncclFloat32;
    case DIST_FLOAT64:
      return ncclFloat64;
    default:
      return absl::UnimplementedError("unknown dtype");
  }
}

absl::StatusOr<ncclRedOp_t> NcclOp(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
      return ncclSum;
    case DIST_PRODUCT:
      return ncclProd;
    case DIST_MIN:
      return ncclMin;
    case DIST_MAX:
      return ncclMax;
    case DIST_AVG:
      return ncclAvg;
    default:
      return absl::UnimplementedError(absl::StrCat("NCCL has no ", dist_reduce_op_name(op)));
  }
}

class NcclBaseline : public Baseline {
 public:
  NcclBaseline(ncclComm_t comm, cudaStream_t stream, int device)
      : comm_(comm), stream_(stream), device_(device) {}
  ~NcclBaseline() override {
    if (token_ != nullptr) cudaFree(token_);
    ncclCommDestroy(comm_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }
  std::string description() const override {
    int version = 0;
    ncclGetVersion(&version);
    return absl::StrCat("NCCL ", version / 10000, ".", (version / 100) % 100, ".", version % 100,
                        " (GPU ", device_, ")");
  }

  absl::Status Supports(const Case& c) const override {
    if (c.op->op == Op::kBarrier) return absl::OkStatus();  // no data, no dtype
    if (!NcclType(c.dtype).ok()) return NcclType(c.dtype).status();
    if (c.op->reduces && !NcclOp(c.redop).ok()) return NcclOp(c.redop).status();
    return absl::OkStatus();
  }

  absl::Status Run(const Case& c, void* send, void* recv) override {
    absl::StatusOr<ncclDataType_t> type_or = NcclType(c.dtype);
    if (!type_or.ok()) return type_or.status();
    const ncclDataType_t type = *type_or;
    ncclRedOp_t op = ncclSum;
    if (c.op->reduces) {
      absl::StatusOr<ncclRedOp_t> op_or = NcclOp(c.redop);
      if (!op_or.ok()) return op_or.status();
      op = *op_or;
    }
    const size_t n = c.block;
    const int w = c.world_size;
    const size_t block_bytes = n * c.element_size();
    char* s = static_cast<char*>(send);
    char* r = static_cast<char*>(recv);
    switch (c.op->op) {
      case Op::kAllReduce:
        DIST_CHECK(Nccl(ncclAllReduce(send, recv, n, type, op, comm_, stream_), "ncclAllReduce"));
        break;
      case Op::kBroadcast:
        DIST_CHECK(
            Nccl(ncclBroadcast(send, recv, n, type, c.root, comm_, stream_), "ncclBroadcast"));
        break;
      case Op::kReduce:
        DIST_CHECK(Nccl(ncclReduce(send, recv, n, type, op, c.root, comm_, stream_), "ncclReduce"));
        break;
      case Op::kAllGather:
        DIST_CHECK(Nccl(ncclAllGather(send, recv, n, type, comm_, stream_), "ncclAllGather"));
        break;
      case Op::kReduceScatter:
        DIST_CHECK(
            Nccl(ncclReduceScatter(send, recv, n, type, op, comm_, stream_), "ncclReduceScatter"));
        break;
      case Op::kGather:
        DIST_CHECK(Nccl(ncclGroupStart(), "ncclGroupStart"));
        if (c.rank == c.root) {
          for (int j = 0; j < w; ++j) ncclRecv(r + j * block_bytes, n, type, j, comm_, stream_);
        }
        ncclSend(send, n, type, c.root, comm_, stream_);
        DIST_CHECK(Nccl(ncclGroupEnd(), "gather (grouped send/recv)"));
        break;
      case Op::kScatter:
        DIST_CHECK(Nccl(ncclGroupStart(), "ncclGroupStart"));
        if (c.rank == c.root) {
          for (int j = 0; j < w; ++j) ncclSend(s + j * block_bytes, n, type, j, comm_, stream_);
        }
        ncclRecv(recv, n, type, c.root, comm_, stream_);
        DIST_CHECK(Nccl(ncclGroupEnd(), "scatter (grouped send/recv)"));
        break;
      case Op::kAllToAll:
        DIST_CHECK(Nccl(ncclGroupStart(), "ncclGroupStart"));
        for (int j = 0; j < w; ++j) {
          ncclSend(s + j * block_bytes, n, type, j, comm_, stream_);
          ncclRecv(r + j * block_bytes, n, type, j, comm_, stream_);
        }
        DIST_CHECK(Nccl(ncclGroupEnd(), "all_to_all (grouped send/recv)"));
        break;
      case Op::kSendRecv:
        DIST_CHECK(Nccl(ncclGroupStart(), "ncclGroupStart"));
        ncclSend(send, n, type, (c.rank + 1) % w, comm_, stream_);
        ncclRecv(recv, n, type, (c.rank + w - 1) % w, comm_, stream_);
        DIST_CHECK(Nccl(ncclGroupEnd(), "sendrecv (grouped send/recv)"));
        break;
      case Op::kBarrier:
        return Barrier();
    }
    // Blocking, like the plugin call it is compared with.
    return Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  // NCCL has no barrier; a one-element all-reduce is the usual stand-in.
  absl::Status Barrier() override {
    if (token_ == nullptr) DIST_CHECK(Cuda(cudaMalloc(&token_, sizeof(float)), "cudaMalloc"));
    DIST_CHECK(Nccl(ncclAllReduce(token_, token_, 1, ncclFloat32, ncclSum, comm_, stream_),
                    "ncclAllReduce (barrier)"));
    return Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_;
  void* token_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Baseline>> MakeNcclBaseline(const BaselineSetup& setup) {
  if (setup.device.type != DIST_DEVICE_CUDA) {
    return absl::FailedPreconditionError(
        "the NCCL baseline needs --device=cuda (and a backend serving CUDA)");
  }
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    return absl::UnavailableError(absl::StrCat(
        "no CUDA device: ", error == cudaSuccess ? "none found" : cudaGetErrorString(error)));
  }
  DIST_CHECK(Cuda(cudaSetDevice(setup.device.index), "cudaSetDevice"));
  std::string id_text;
  if (setup.rank == 0) {
    ncclUniqueId id;
    DIST_CHECK(Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    id_text = absl::BytesToHexString(absl::string_view(id.internal, sizeof(id.internal)));
  }
  // Hex, so the id survives the string broadcast's NUL terminator.
  absl::StatusOr<std::string> shared = BroadcastString(setup.pg, setup.device, id_text);
  if (!shared.ok()) return shared.status();
  const std::string bytes = absl::HexStringToBytes(*shared);
  ncclUniqueId id;
  if (bytes.size() != sizeof(id.internal)) {
    return absl::InternalError("rank 0 sent a malformed NCCL unique id");
  }
  std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  cudaStream_t stream = nullptr;
  DIST_CHECK(Cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  ncclComm_t comm = nullptr;
  absl::Status status =
      Nccl(ncclCommInitRank(&comm, setup.world_size, id, setup.rank), "ncclCommInitRank");
  if (!status.ok()) {
    cudaStreamDestroy(stream);
    return status;
  }
  return std::unique_ptr<Baseline>(new NcclBaseline(comm, stream, setup.device.index));
}

}  // namespace distbench

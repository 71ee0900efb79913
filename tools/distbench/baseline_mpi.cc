// Raw MPI: the MPI_* collective matching each operation, on a duplicate of
// MPI_COMM_WORLD, in the processes mpirun started.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/distbench/baseline.h"

namespace distbench {
namespace {

absl::StatusOr<MPI_Datatype> MpiType(dist_dtype_t dtype) {
  switch (dtype) {
    case DIST_INT8:
      return MPI_INT8_T;
    case DIST_UINT8:
      return MPI_UINT8_T;
    case DIST_INT32:
      return MPI_INT32_T;
    case DIST_INT64:
      return MPI_INT64_T;
    case DIST_FLOAT32:
      return MPI_FLOAT;
    case DIST_FLOAT64:
      return MPI_DOUBLE;
    default:
      return absl::UnimplementedError(absl::StrCat("MPI has no ", dist_dtype_name(dtype)));
  }
}

// AVG is MPI_SUM followed by a local division (MPI has no average).
absl::StatusOr<MPI_Op> MpiOp(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:
      return MPI_SUM;
    case DIST_PRODUCT:
      return MPI_PROD;
    case DIST_MIN:
      return MPI_MIN;
    case DIST_MAX:
      return MPI_MAX;
    case DIST_BAND:
      return MPI_BAND;
    case DIST_BOR:
      return MPI_BOR;
    case DIST_BXOR:
      return MPI_BXOR;
    default:
      return absl::UnimplementedError("unknown reduce op");
  }
}

void Divide(dist_dtype_t dtype, void* data, size_t n, int ranks) {
  auto divide = [&](auto* values) {
    for (size_t i = 0; i < n; ++i) {
      values[i] = static_cast<std::remove_reference_t<decltype(values[i])>>(values[i] / ranks);
    }
  };
  switch (dtype) {
    case DIST_INT8:
      divide(static_cast<int8_t*>(data));
      break;
    case DIST_UINT8:
      divide(static_cast<uint8_t*>(data));
      break;
    case DIST_INT32:
      divide(static_cast<int32_t*>(data));
      break;
    case DIST_INT64:
      divide(static_cast<int64_t*>(data));
      break;
    case DIST_FLOAT32:
      divide(static_cast<float*>(data));
      break;
    case DIST_FLOAT64:
      divide(static_cast<double*>(data));
      break;
    default:
      break;
  }
}

absl::Status Check(int code, const char* what);

// Returns from Run when an MPI call fails.
#define DIST_MPI(call, what)                          \
  do {                                                \
    absl::Status mpi_status_ = Check((call), (what)); \
    if (!mpi_status_.ok()) return mpi_status_;        \
  } while (0)

absl::Status Check(int code, const char* what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  MPI_Error_string(code, text, &length);
  return absl::UnavailableError(absl::StrCat("raw MPI ", what, ": ", text));
}

class MpiBaseline : public Baseline {
 public:
  MpiBaseline(MPI_Comm comm, bool finalize) : comm_(comm), finalize_(finalize) {}
  ~MpiBaseline() override {
    MPI_Comm_free(&comm_);
    if (finalize_) MPI_Finalize();
  }

  std::string name() const override { return "mpi"; }
  std::string description() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string text(version);
    // MPICH's first line is "MPICH Version:\t4.0.2": say "MPICH 4.0.2".
    const std::string mpich = "MPICH Version:";
    if (text.compare(0, mpich.size(), mpich) == 0) {
      const size_t start = text.find_first_not_of(" \t", mpich.size());
      const size_t end = text.find_first_of("\r\n", mpich.size());
      return "MPICH " + text.substr(start, end == std::string::npos ? end : end - start);
    }
    const size_t comma = text.find(',');  // "Open MPI v4.1.4, package: ..."
    return comma == std::string::npos ? text : text.substr(0, comma);
  }

  absl::Status Supports(const Case& c) const override {
    if (c.op->op == Op::kBarrier) return absl::OkStatus();  // no data, no dtype
    absl::StatusOr<MPI_Datatype> type = MpiType(c.dtype);
    if (!type.ok()) return type.status();
    if (c.op->reduces && (c.redop == DIST_BAND || c.redop == DIST_BOR || c.redop == DIST_BXOR) &&
        dist_dtype_is_floating(c.dtype)) {
      return absl::UnimplementedError("bitwise ops need an integer dtype");
    }
    if (c.block > static_cast<uint64_t>(INT32_MAX / c.world_size)) {
      return absl::UnimplementedError("count exceeds MPI's int counts");
    }
    return absl::OkStatus();
  }

  absl::Status Run(const Case& c, void* send, void* recv) override {
    absl::StatusOr<MPI_Datatype> type_or = MpiType(c.dtype);
    if (!type_or.ok()) return type_or.status();
    const MPI_Datatype type = *type_or;
    const int n = static_cast<int>(c.block);
    const int w = c.world_size;
    MPI_Op op = MPI_SUM;
    if (c.op->reduces) {
      absl::StatusOr<MPI_Op> op_or = MpiOp(c.redop);
      if (!op_or.ok()) return op_or.status();
      op = *op_or;
    }
    const bool average = c.op->reduces && c.redop == DIST_AVG;
    switch (c.op->op) {
      case Op::kAllReduce:
        DIST_MPI(MPI_Allreduce(send, recv, n, type, op, comm_), "MPI_Allreduce");
        if (average) Divide(c.dtype, recv, n, w);
        break;
      case Op::kBroadcast:
        // MPI broadcasts in place; the root's data starts in recv.
        if (c.rank == c.root) std::memcpy(recv, send, c.block * c.element_size());
        DIST_MPI(MPI_Bcast(recv, n, type, c.root, comm_), "MPI_Bcast");
        break;
      case Op::kReduce:
        DIST_MPI(MPI_Reduce(send, recv, n, type, op, c.root, comm_), "MPI_Reduce");
        if (average && c.rank == c.root) Divide(c.dtype, recv, n, w);
        break;
      case Op::kAllGather:
        DIST_MPI(MPI_Allgather(send, n, type, recv, n, type, comm_), "MPI_Allgather");
        break;
      case Op::kGather:
        DIST_MPI(MPI_Gather(send, n, type, recv, n, type, c.root, comm_), "MPI_Gather");
        break;
      case Op::kScatter:
        DIST_MPI(MPI_Scatter(send, n, type, recv, n, type, c.root, comm_), "MPI_Scatter");
        break;
      case Op::kReduceScatter:
        DIST_MPI(MPI_Reduce_scatter_block(send, recv, n, type, op, comm_),
                 "MPI_Reduce_scatter_block");
        if (average) Divide(c.dtype, recv, n, w);
        break;
      case Op::kAllToAll:
        DIST_MPI(MPI_Alltoall(send, n, type, recv, n, type, comm_), "MPI_Alltoall");
        break;
      case Op::kBarrier:
        DIST_MPI(MPI_Barrier(comm_), "MPI_Barrier");
        break;
      case Op::kSendRecv:
        DIST_MPI(MPI_Sendrecv(send, n, type, (c.rank + 1) % w, 0, recv, n, type,
                              (c.rank + w - 1) % w, 0, comm_, MPI_STATUS_IGNORE),
                 "MPI_Sendrecv");
        break;
    }
    return absl::OkStatus();
  }

  absl::Status Barrier() override { return Check(MPI_Barrier(comm_), "MPI_Barrier"); }

 private:
  MPI_Comm comm_;
  bool finalize_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Baseline>> MakeMpiBaseline(const BaselineSetup& setup) {
  if (setup.device.type != DIST_DEVICE_CPU) {
    return absl::UnimplementedError("the MPI baseline runs on --device=cpu only");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  bool finalize = false;
  if (!initialized) {
    // Only under a launcher: a singleton MPI_Init would make a world of one.
    if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr &&
        std::getenv("PMIX_RANK") == nullptr) {
      return absl::FailedPreconditionError(
          "the MPI baseline needs ranks started by mpirun; run mpirun -np N distbench ...");
    }
    int provided = 0;
    absl::Status status =
        Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    if (!status.ok()) return status;
    finalize = true;
  }
  MPI_Comm comm = MPI_COMM_NULL;
  absl::Status status = Check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  if (!status.ok()) return status;
  // Errors come back as codes (and become one-line statuses), not aborts.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = -1;
  int size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  auto baseline = std::make_unique<MpiBaseline>(comm, finalize);
  if (rank != setup.rank || size != setup.world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MPI_COMM_WORLD has rank ", rank, " of ", size, " but the group has rank ", setup.rank,
        " of ", setup.world_size, "; start every rank with the same mpirun"));
  }
  return std::unique_ptr<Baseline>(std::move(baseline));
}

}  // namespace distbench

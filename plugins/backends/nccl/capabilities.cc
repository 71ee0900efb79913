#include "plugins/backends/nccl/capabilities.h"

namespace dist_nccl {
namespace {

constexpr uint32_t Bit(int value) { return 1u << value; }

// NCCL reduces with sum, prod, min, max and avg (ncclAvg); it has no bitwise
// reductions, so band/bor/bxor are left out of every mask.
constexpr uint32_t kReduceOps =
    Bit(DIST_SUM) | Bit(DIST_PRODUCT) | Bit(DIST_MIN) | Bit(DIST_MAX) | Bit(DIST_AVG);

}  // namespace

void FillCapabilities(dist_backend_capabilities_t& caps) {
  caps.device_types = Bit(DIST_DEVICE_CUDA);
  caps.dtypes = Bit(DIST_INT8) | Bit(DIST_UINT8) | Bit(DIST_INT32) | Bit(DIST_INT64) |
                Bit(DIST_FLOAT16) | Bit(DIST_BFLOAT16) | Bit(DIST_FLOAT32) | Bit(DIST_FLOAT64);
  caps.collectives = (1u << DIST_COLLECTIVE_COUNT) - 1u;  // all eleven
  caps.all_reduce_ops = kReduceOps;
  caps.reduce_ops = kReduceOps;
  caps.reduce_scatter_ops = kReduceOps;
  // No THREAD_MULTIPLE: NCCL needs every rank to issue in the same order,
  // which concurrent callers on one communicator cannot promise.
  // DIST_CAP_SHRINK: the survivors' communicator is a new one made from the
  // store (ncclCommInitRank); not yet run on a GPU (docs/survival.md).
  caps.flags = DIST_CAP_SUBGROUPS | DIST_CAP_STREAM_WAIT | DIST_CAP_CUDA_AWARE | DIST_CAP_SHRINK;
  caps.notes =
      "CUDA buffers only, one GPU per rank; send/recv pair up in issue order per peer "
      "(tags are not used for matching); no bitwise reductions";
}

}  // namespace dist_nccl

#include "plugins/backends/nccl/capabilities.h"

#include <cstddef>
#include <cstring>

namespace dist::nccl {
namespace {

constexpr uint32_t Bit(int value) { return 1u << value; }

// NCCL reduces with sum, prod, min, max and avg (ncclAvg); it has no bitwise
// reductions, so band/bor/bxor are left out of every mask.
constexpr uint32_t kReduceOps =
    Bit(DIST_SUM) | Bit(DIST_PRODUCT) | Bit(DIST_MIN) | Bit(DIST_MAX) | Bit(DIST_AVG);

}  // namespace

void FillCapabilities(dist_backend_capabilities_t* caps) {
  if (caps == nullptr) return;
  dist_backend_capabilities_t full;
  std::memset(&full, 0, sizeof(full));
  full.device_types = Bit(DIST_DEVICE_CUDA);
  full.dtypes = Bit(DIST_INT8) | Bit(DIST_UINT8) | Bit(DIST_INT32) | Bit(DIST_INT64) |
                Bit(DIST_FLOAT16) | Bit(DIST_BFLOAT16) | Bit(DIST_FLOAT32) | Bit(DIST_FLOAT64);
  full.collectives = (1u << DIST_COLLECTIVE_COUNT) - 1u;  // all eleven
  full.all_reduce_ops = kReduceOps;
  full.reduce_ops = kReduceOps;
  full.reduce_scatter_ops = kReduceOps;
  // No THREAD_MULTIPLE: NCCL needs every rank to issue in the same order,
  // which concurrent callers on one communicator cannot promise.
  full.flags = DIST_CAP_SUBGROUPS | DIST_CAP_STREAM_WAIT | DIST_CAP_CUDA_AWARE;
  full.notes =
      "CUDA buffers only, one GPU per rank; send/recv pair up in issue order per peer "
      "(tags are not used for matching); no bitwise reductions";
  // Copy only as much as the caller's struct holds (it may be older).
  const size_t size = caps->struct_size < sizeof(full) ? caps->struct_size : sizeof(full);
  if (size <= sizeof(size_t)) return;
  std::memcpy(reinterpret_cast<char*>(caps) + sizeof(size_t),
              reinterpret_cast<const char*>(&full) + sizeof(size_t), size - sizeof(size_t));
}

}  // namespace dist::nccl

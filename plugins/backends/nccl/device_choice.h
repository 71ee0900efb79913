// Which GPU a rank uses, and the check that no two ranks share one. Pure
// logic (the CUDA queries and the store exchange live in bootstrap.cc), so
// the rules and their messages are tested without a GPU.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_DEVICE_CHOICE_H_
#define DIST_PLUGINS_BACKENDS_NCCL_DEVICE_CHOICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace dist_nccl {

struct DeviceRequest {
  int32_t rank = 0;
  int32_t device_index = -1;  // config->device_index; -1: choose
  int32_t local_rank = -1;    // config->local_rank, else LOCAL_RANK; -1: unknown
  int device_count = 0;       // cudaGetDeviceCount, > 0
};

// The device ordinal: device_index when set, else local_rank, else
// rank % device_count. A set device_index or local_rank that is out of
// range is an error naming the fix (never silently wrapped: two ranks would
// land on one GPU).
absl::StatusOr<int> ChooseDevice(const DeviceRequest& request);

// One rank's GPU as published through the store.
struct GpuIdentity {
  std::string host;    // gethostname()
  std::string bus_id;  // cudaDeviceGetPCIBusId, unique per host
  int device = 0;      // the ordinal this process uses (for messages)

  std::string Encode() const;  // "host\nbus_id\ndevice"
  static absl::StatusOr<GpuIdentity> Decode(const std::string& text);
};

// FAILED_PRECONDITION naming the first two ranks that share a GPU (same
// host and PCI bus id), telling to set a device per local rank; OK when
// every rank has its own GPU. `ranks[i]` is rank i's identity.
absl::Status CheckOneRankPerGpu(const std::vector<GpuIdentity>& ranks);

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_DEVICE_CHOICE_H_

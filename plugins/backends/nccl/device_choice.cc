#include "plugins/backends/nccl/device_choice.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace dist_nccl {

absl::StatusOr<int> ChooseDevice(const DeviceRequest& request) {
  if (request.device_count <= 0) {
    return absl::UnavailableError("no CUDA device: cudaGetDeviceCount found 0 devices");
  }
  const std::string range = absl::StrCat("0..", request.device_count - 1);
  if (request.device_index >= 0) {
    if (request.device_index >= request.device_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl: rank ", request.rank, " asks for cuda:", request.device_index,
                       " but this host has ", request.device_count, " CUDA devices (", range,
                       "); set the device index within range"));
    }
    return request.device_index;
  }
  if (request.local_rank >= 0) {
    if (request.local_rank >= request.device_count) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl: rank ", request.rank, " has LOCAL_RANK ", request.local_rank,
                       " but this host has ", request.device_count, " CUDA devices (", range,
                       "); NCCL needs one GPU per rank: start at most ", request.device_count,
                       " ranks per host or set a device per local rank"));
    }
    return request.local_rank;
  }
  return request.rank % request.device_count;
}

std::string GpuIdentity::Encode() const { return absl::StrCat(host, "\n", bus_id, "\n", device); }

absl::StatusOr<GpuIdentity> GpuIdentity::Decode(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '\n');
  GpuIdentity identity;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[2], &identity.device)) {
    return absl::DataLossError(
        "nccl: a rank published a malformed GPU identity in the store; do all ranks run "
        "the same nccl plugin version?");
  }
  identity.host = std::move(parts[0]);
  identity.bus_id = std::move(parts[1]);
  return identity;
}

absl::Status CheckOneRankPerGpu(const std::vector<GpuIdentity>& ranks) {
  std::map<std::pair<std::string, std::string>, size_t> first_user;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const GpuIdentity& gpu = ranks[rank];
    auto [it, inserted] = first_user.emplace(std::make_pair(gpu.host, gpu.bus_id), rank);
    if (inserted) continue;
    const GpuIdentity& other = ranks[it->second];
    return absl::FailedPreconditionError(absl::StrCat(
        "nccl: ranks ", it->second, " and ", rank, " both use the GPU at PCI ", gpu.bus_id,
        " on host ", gpu.host, " (cuda:", other.device, " and cuda:", gpu.device,
        "); NCCL needs one GPU per rank: set a device per local rank (LOCAL_RANK, or the "
        "config's device_index) or start fewer ranks on this host"));
  }
  return absl::OkStatus();
}

}  // namespace dist_nccl

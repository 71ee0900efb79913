#include "plugins/backends/nccl/bootstrap.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/store.hpp"
#include "plugins/backends/nccl/comm_config.h"
#include "plugins/backends/nccl/cuda_status.h"
#include "plugins/backends/nccl/device_choice.h"
#include "plugins/backends/nccl/device_guard.h"
#include "plugins/backends/nccl/nccl_poll.h"
#include "plugins/backends/nccl/probe.h"

namespace dist_nccl {
namespace {

constexpr char kUniqueIdKey[] = "nccl/unique_id";

std::string GpuKey(int rank) { return absl::StrCat("nccl/gpu/", rank); }

// config->local_rank, else the LOCAL_RANK variable launchers set, else -1.
int LocalRank(const dist_comm_config_t& config) {
  if (config.local_rank >= 0) return config.local_rank;
  const char* text = std::getenv("LOCAL_RANK");
  int value = -1;
  if (text != nullptr && absl::SimpleAtoi(text, &value) && value >= 0) return value;
  return -1;
}

absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::Milliseconds(1));
}

absl::StatusOr<GpuIdentity> ThisGpu(int device) {
  GpuIdentity identity;
  identity.device = device;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return absl::InternalError("gethostname failed");
  identity.host = host;
  char bus_id[64] = {};
  absl::Status status = CudaStatus(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device),
                                   absl::StrCat("nccl: cudaDeviceGetPCIBusId(cuda:", device, ")"));
  if (!status.ok()) return status;
  identity.bus_id = bus_id;
  return identity;
}

// Every rank publishes its host and GPU, then reads everyone's: each rank
// reaches the same verdict, so a shared GPU fails on all ranks alike
// (NCCL itself would hang or fail obscurely).
absl::Status CheckGpusThroughStore(const dist::StoreView& store, const dist_comm_config_t& config,
                                   const GpuIdentity& mine, absl::Time deadline,
                                   const std::string& where) {
  absl::Status status = store.Set(GpuKey(config.rank), mine.Encode());
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(where, ": publishing this rank's GPU: ", status.message()));
  }
  std::vector<GpuIdentity> all(static_cast<size_t>(config.world_size));
  for (int rank = 0; rank < config.world_size; ++rank) {
    absl::StatusOr<std::string> text = store.Get(GpuKey(rank), Remaining(deadline));
    if (!text.ok()) {
      return absl::Status(
          text.status().code(),
          absl::StrCat(where, ": waiting for rank ", rank,
                       " to publish its GPU (is it running?): ", text.status().message()));
    }
    absl::StatusOr<GpuIdentity> identity = GpuIdentity::Decode(*text);
    if (!identity.ok()) return identity.status();
    all[static_cast<size_t>(rank)] = *std::move(identity);
  }
  return CheckOneRankPerGpu(all);
}

absl::StatusOr<ncclUniqueId> ShareUniqueId(const dist::StoreView& store,
                                           const dist_comm_config_t& config, absl::Time deadline,
                                           const std::string& where) {
  ncclUniqueId id;
  if (config.rank == 0) {
    absl::Status status =
        NcclStatus(ncclGetUniqueId(&id), nullptr, absl::StrCat(where, ": ncclGetUniqueId"));
    if (!status.ok()) return status;
    status = store.Set(kUniqueIdKey, std::string(id.internal, sizeof(id.internal)));
    if (!status.ok()) {
      return absl::Status(status.code(),
                          absl::StrCat(where, ": publishing the ncclUniqueId: ", status.message()));
    }
    return id;
  }
  absl::StatusOr<std::string> text = store.Get(kUniqueIdKey, Remaining(deadline));
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat(where, ": waiting for rank 0's ncclUniqueId: ", text.status().message()));
  }
  if (text->size() != sizeof(id.internal)) {
    return absl::DataLossError(absl::StrCat(where, ": the ncclUniqueId in the store has ",
                                            text->size(), " bytes, not ", sizeof(id.internal),
                                            "; do all ranks use the same NCCL?"));
  }
  std::copy(text->begin(), text->end(), id.internal);
  return id;
}

absl::Status CheckConfig(const dist_comm_config_t& config) {
  if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: rank ", config.rank, " is outside world size ", config.world_size));
  }
  if (config.store == nullptr) {
    return absl::InvalidArgumentError("nccl: comm_create needs a store to share the ncclUniqueId");
  }
  if (config.timeout_ms <= 0) {
    return absl::InvalidArgumentError("nccl: comm_create needs a timeout > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<Communicator>> CreateCommunicator(const dist_comm_config_t& config) {
  absl::Status status = CheckConfig(config);
  if (!status.ok()) return status;
  // Without a device nothing below can work; say so plainly first.
  absl::StatusOr<int> count = CountCudaDevices();
  if (!count.ok()) return count.status();

  const absl::Time start = absl::Now();
  const absl::Duration timeout = absl::Milliseconds(config.timeout_ms);
  const absl::Time deadline = start + timeout;
  CommSettings settings;
  settings.rank = config.rank;
  settings.world_size = config.world_size;
  settings.group = config.group_name != nullptr ? config.group_name : "default";
  settings.timeout = timeout;
  settings.store = config.store;

  DeviceRequest request;
  request.rank = config.rank;
  request.device_index = config.device_index;
  request.local_rank = LocalRank(config);
  request.device_count = *count;
  absl::StatusOr<int> device = ChooseDevice(request);
  if (!device.ok()) return device.status();
  settings.device = *device;
  const std::string where = absl::StrCat("nccl init on rank ", settings.rank, " of group '",
                                         settings.group, "' (cuda:", settings.device, ")");
  // NCCL binds the communicator to the device current at init.
  const DeviceGuard device_guard(settings.device);
  status = CudaStatus(device_guard.result(), absl::StrCat(where, ": cudaSetDevice"));
  if (!status.ok()) return status;

  const dist::StoreView store(config.store);
  absl::StatusOr<GpuIdentity> mine = ThisGpu(settings.device);
  if (!mine.ok()) return mine.status();
  status = CheckGpusThroughStore(store, config, *mine, deadline, where);
  if (!status.ok()) return status;
  absl::StatusOr<ncclUniqueId> id = ShareUniqueId(store, config, deadline, where);
  if (!id.ok()) return id.status();

  // Non-blocking: init is polled below, so a missing rank cannot hang us.
  ncclConfig_t nccl_config = NonBlockingConfig(settings.group);
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      ncclCommInitRankConfig(&comm, config.world_size, *id, config.rank, &nccl_config);
  if (result != ncclSuccess && result != ncclInProgress) {
    status = NcclStatus(result, comm, absl::StrCat(where, ": ncclCommInitRankConfig"));
  } else {
    status = AwaitNccl(comm, deadline, nullptr, absl::StrCat(where, ": ncclCommInitRankConfig"));
    if (status.code() == absl::StatusCode::kDeadlineExceeded) {
      status = absl::DeadlineExceededError(
          absl::StrCat(where, ": NCCL did not finish connecting the ", config.world_size,
                       " ranks within ", config.timeout_ms,
                       " ms; a rank died or cannot reach the others (check "
                       "NCCL_SOCKET_IFNAME and NCCL_DEBUG=WARN); the communicator was aborted"));
    }
  }
  if (!status.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    return status;
  }
  dist::Log(DIST_LOG_INFO, absl::StrCat(where, ": NCCL communicator of ", config.world_size,
                                        " ranks ready on GPU ", mine->bus_id, " in ",
                                        absl::FormatDuration(absl::Now() - start)));
  return Communicator::Adopt(comm, std::move(settings));
}

}  // namespace dist_nccl

// The nccl backend's entry point: its Backend for the SDK's plugin adapter
// (dist/cpp/backend_adapter.hpp), which owns the C table.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "dist/cpp/backend_adapter.hpp"
#include "plugins/backends/nccl/bootstrap.h"
#include "plugins/backends/nccl/capabilities.h"
#include "plugins/backends/nccl/communicator.h"
#include "plugins/backends/nccl/probe.h"
#include "plugins/backends/nccl/work_state.h"
#include "plugins/backends/nccl/work_wait.h"

namespace dist_nccl {
namespace {

class NcclWork : public dist::BackendWork {
 public:
  NcclWork(std::shared_ptr<WorkState> state, std::shared_ptr<Communicator> comm)
      : state_(std::move(state)), comm_(std::move(comm)) {}
  absl::Status Wait(absl::Duration timeout) override {
    return WaitForWork(*state_, *comm_, timeout);
  }
  absl::Status Test(bool* done) override {
    std::optional<absl::Status> result = comm_->Poll(*state_);
    if (!result.has_value()) {
      comm_->Check();  // a failure shows up on the next poll
      result = comm_->Poll(*state_);
    }
    *done = result.has_value();
    return result.value_or(absl::OkStatus());
  }
  absl::Status WaitStream(void* stream) override { return WaitOnStream(*state_, *comm_, stream); }

 private:
  std::shared_ptr<WorkState> state_;
  std::shared_ptr<Communicator> comm_;  // for health checks while waiting
};

class NcclComm : public dist::BackendComm {
 public:
  explicit NcclComm(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  ~NcclComm() override { comm_->Shutdown(); }
  int rank() const override { return comm_->settings().rank; }
  int world_size() const override { return comm_->settings().world_size; }
  absl::StatusOr<std::unique_ptr<dist::BackendWork>> Issue(dist_collective_t kind,
                                                           const dist_op_args_t& args) override {
    absl::StatusOr<std::shared_ptr<WorkState>> work = comm_->Issue(kind, args);
    if (!work.ok()) return work.status();
    return std::make_unique<NcclWork>(*std::move(work), comm_);
  }
  // all_to_all_v, all_gather_v and reduce_scatter_v as NCCL groups
  // (Communicator::IssueVariable), run to their end as `run` runs the others.
  absl::Status RunVariable(dist_collective_t kind, const dist_op_args_t& args,
                           const dist_op_counts_t& counts, absl::Duration timeout) override {
    const absl::Duration bound =
        timeout > absl::ZeroDuration() ? timeout : comm_->settings().timeout;
    const absl::Time deadline = absl::Now() + bound;
    absl::StatusOr<std::shared_ptr<WorkState>> work =
        comm_->IssueVariable(kind, args, counts, bound);
    if (!work.ok()) return work.status();
    return WaitForWork(**work, *comm_, std::max(deadline - absl::Now(), absl::ZeroDuration()));
  }
  void Abort(const std::string& reason) override { comm_->AbortByCaller(reason); }
  // NCCL derives membership from each rank's color and key, not `ranks`.
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> Split(
      const int32_t* ranks, size_t num_ranks, const dist_comm_config_t& config) override {
    return dist::WrapComm<NcclComm>(comm_->Split(config));
  }

 private:
  std::shared_ptr<Communicator> comm_;
};

class NcclBackend : public dist::Backend {
 public:
  const char* name() const override { return "nccl"; }
  const char* version() const override { return "1.0.0"; }
  const char* LibraryVersion() override {
    static const std::string* const text = new std::string(LibraryVersionText());
    return text->c_str();
  }
  absl::Status Probe() override { return CountCudaDevices().status(); }
  void Capabilities(dist_backend_capabilities_t& caps) override { FillCapabilities(caps); }
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> CreateComm(
      const dist_comm_config_t& config) override {
    return dist::WrapComm<NcclComm>(CreateCommunicator(config));
  }
  bool has_wait_stream() const override { return true; }
  bool has_variable_counts() const override { return true; }
};

}  // namespace
}  // namespace dist_nccl

DIST_EXPORT_BACKEND_PLUGIN(dist_nccl::NcclBackend)

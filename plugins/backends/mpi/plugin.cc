// The MPI backend's entry point: its Backend for the SDK's plugin adapter
// (dist/cpp/backend_adapter.hpp), which owns the C table.
#include <memory>
#include <string>

#include "comm.h"
#include "dist/cpp/backend_adapter.hpp"
#include "ops.h"
#include "options.h"
#include "probe.h"
#include "runtime.h"
#include "support/mpi_flavor.h"

namespace dist_mpi {
namespace {

class MpiWork : public dist::BackendWork {
 public:
  MpiWork(std::shared_ptr<Comm> comm, std::shared_ptr<PendingOp> op)
      : comm_(std::move(comm)), op_(std::move(op)) {}
  absl::Status Wait(absl::Duration timeout) override { return comm_->Wait(*op_, timeout); }
  absl::Status Test(bool* done) override {
    *done = comm_->Test(*op_);
    // Done, or the group was aborted: Wait(0) returns the final status.
    return *done ? comm_->Wait(*op_, absl::ZeroDuration()) : absl::OkStatus();
  }

 private:
  std::shared_ptr<Comm> comm_;
  std::shared_ptr<PendingOp> op_;
};

class MpiComm : public dist::BackendComm {
 public:
  explicit MpiComm(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {}
  ~MpiComm() override { comm_->Destroy(); }
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  absl::StatusOr<std::unique_ptr<dist::BackendWork>> Issue(dist_collective_t kind,
                                                           const dist_op_args_t& args) override {
    OpResult op = dist_mpi::Issue(kind, *comm_, args);
    if (!op.ok()) return op.status();
    return std::make_unique<MpiWork>(comm_, *std::move(op));
  }
  // A blocking call: issue and wait under one SIGPIPE block (no_sigpipe.hpp).
  absl::Status Run(dist_collective_t kind, const dist_op_args_t& args,
                   absl::Duration timeout) override {
    dist::ScopedSigpipeBlock no_sigpipe;
    return dist::BackendComm::Run(kind, args, timeout);
  }
  // dist_sendrecv: both issued and waited for under one SIGPIPE block too
  // (one set of its syscalls, not one per wait).
  absl::Status RunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                           absl::Duration timeout) override {
    dist::ScopedSigpipeBlock no_sigpipe;
    return dist::BackendComm::RunSendRecv(send, recv, timeout);
  }
  // dist_all_to_all_v, dist_all_gather_v, dist_reduce_scatter_v: MPI's own.
  absl::Status RunVariable(dist_collective_t kind, const dist_op_args_t& args,
                           const dist_op_counts_t& counts, absl::Duration timeout) override {
    dist::ScopedSigpipeBlock no_sigpipe;
    OpResult op = dist_mpi::IssueVariable(kind, *comm_, args, counts);
    if (!op.ok()) return op.status();
    return comm_->Wait(**op, timeout);
  }
  void Abort(const std::string& reason) override { comm_->Abort(reason); }
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> Split(
      const int32_t* ranks, size_t num_ranks, const dist_comm_config_t& config) override {
    return dist::WrapComm<MpiComm>(comm_->Split(ranks, num_ranks, config));
  }

 private:
  std::shared_ptr<Comm> comm_;
};

class MpiBackend : public dist::Backend {
 public:
  // "openmpi" or "mpich": one build per implementation (flavor.h).
  const char* name() const override { return dist_mpi_flavor::kName; }
  const char* version() const override { return "1.0.0"; }
  const char* LibraryVersion() override { return Runtime::Get().library_version(); }
  absl::Status Initialize(const dist_host_api_t* host) override {
    return Runtime::Get().Attach(host);
  }
  absl::Status Probe() override { return ProbeLauncher(); }
  void Capabilities(dist_backend_capabilities_t& caps) override { FillCapabilities(caps); }
  bool has_variable_counts() const override { return true; }
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> CreateComm(
      const dist_comm_config_t& config) override {
    absl::StatusOr<CommOptions> options = ParseOptions(config);
    if (!options.ok()) return options.status();
    return dist::WrapComm<MpiComm>(Comm::CreateWorld(config, *options));
  }
};

}  // namespace
}  // namespace dist_mpi

DIST_EXPORT_BACKEND_PLUGIN(dist_mpi::MpiBackend)

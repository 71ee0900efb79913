// The MPI backend's entry point: its Backend for the SDK's plugin adapter
// (dist/cpp/backend_adapter.hpp), which owns the C table, and its Transport
// for the SDK runtime (dist/cpp/runtime.hpp), which owns issue order, work
// handles, deadlines, abort and revoke.
#include <memory>
#include <string>

#include "comm.h"
#include "dist/cpp/backend_adapter.hpp"
#include "dist/cpp/runtime.hpp"
#include "ops.h"
#include "options.h"
#include "probe.h"
#include "runtime.h"
#include "support/mpi_flavor.h"

namespace dist_mpi {
namespace {

// An MPI request in flight: a waiter drives MPI (Open MPI has no
// asynchronous progress of its own); the progress thread does it for work
// nobody waits on (progress.h).
class MpiInFlight : public dist::InFlight {
 public:
  MpiInFlight(std::shared_ptr<Comm> comm, std::shared_ptr<PendingOp> op)
      : comm_(std::move(comm)), op_(std::move(op)) {}
  void Drive(absl::Time until) override { comm_->Drive(*op_, until); }
  absl::Status Overdue() override { return comm_->OverdueError(*op_); }

 private:
  std::shared_ptr<Comm> comm_;
  std::shared_ptr<PendingOp> op_;
};

// The MPI communicator under the SDK runtime (dist/cpp/runtime.hpp): every
// operation is one non-blocking MPI call (or the plugin's own schedule of
// them), started in issue order and left in flight.
class MpiTransport : public dist::Transport {
 public:
  explicit MpiTransport(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {}
  ~MpiTransport() override { comm_->Destroy(); }

  bool StartsAtOnce(dist_collective_t) const override { return true; }
  // dist_all_to_all_v, dist_all_gather_v, dist_reduce_scatter_v: MPI's own.
  bool RunsVariableCounts(dist_collective_t) const override { return true; }

  absl::StatusOr<std::unique_ptr<dist::InFlight>> Start(const dist::Op& op, dist::OpContext&,
                                                        Finish finish) override {
    OpResult started = op.counts != nullptr
                           ? dist_mpi::IssueVariable(op.kind, *comm_, op.args, *op.counts)
                           : dist_mpi::Issue(op.kind, *comm_, op.args);
    if (!started.ok()) return started.status();
    comm_->SetOnDone(*started, std::move(finish));
    return std::unique_ptr<dist::InFlight>(new MpiInFlight(comm_, *std::move(started)));
  }
  void Interrupt(const absl::Status& why) override { comm_->Abort(std::string(why.message())); }
  absl::StatusOr<std::unique_ptr<dist::Transport>> Split(
      const int32_t* ranks, size_t num_ranks, const dist_comm_config_t& config) override {
    absl::StatusOr<std::shared_ptr<Comm>> child = comm_->Split(ranks, num_ranks, config);
    if (!child.ok()) return child.status();
    if (*child == nullptr) return std::unique_ptr<dist::Transport>();
    return std::unique_ptr<dist::Transport>(new MpiTransport(*std::move(child)));
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
    absl::StatusOr<std::shared_ptr<Comm>> comm = Comm::CreateWorld(config, *options);
    if (!comm.ok()) return comm.status();
    return dist::MakeRuntimeComm(config, std::make_unique<MpiTransport>(*std::move(comm)));
  }
};

}  // namespace
}  // namespace dist_mpi

DIST_EXPORT_BACKEND_PLUGIN(dist_mpi::MpiBackend)

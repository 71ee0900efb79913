// The Gloo backend's entry point: its Backend for the SDK's plugin adapter
// (dist/cpp/backend_adapter.hpp), which owns the C table.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "dist/cpp/backend_adapter.hpp"
#include "gloo/config.h"
#include "plugins/backends/gloo/communicator.h"
#include "plugins/backends/gloo/variable_counts.h"
#include "plugins/backends/gloo/work.h"

namespace dist_gloo {
namespace {

class GlooWork : public dist::BackendWork {
 public:
  GlooWork(std::shared_ptr<Work> work, std::weak_ptr<Communicator> comm)
      : work_(std::move(work)), comm_(std::move(comm)) {}
  absl::Status Wait(absl::Duration timeout) override {
    if (!work_->done()) {
      // Runs the operation on this thread when it is next and the worker idles.
      if (std::shared_ptr<Communicator> comm = comm_.lock()) {
        if (!comm->TryRunInline(work_, timeout)) comm->Poke();
      }
    }
    return work_->Wait(timeout);
  }
  absl::Status Test(bool* done) override {
    absl::Status status = work_->Test(done);
    if (!*done) {
      if (std::shared_ptr<Communicator> comm = comm_.lock()) comm->Poke();  // make progress
    }
    return status;
  }

 private:
  std::shared_ptr<Work> work_;
  std::weak_ptr<Communicator> comm_;  // for waiting inline
};

class GlooComm : public dist::BackendComm {
 public:
  explicit GlooComm(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  ~GlooComm() override { comm_->Shutdown(); }
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  absl::StatusOr<std::unique_ptr<dist::BackendWork>> Issue(dist_collective_t kind,
                                                           const dist_op_args_t& args) override {
    absl::StatusOr<std::shared_ptr<Work>> work = comm_->Issue(kind, args);
    if (!work.ok()) return work.status();
    return std::make_unique<GlooWork>(*std::move(work), comm_);
  }
  // Blocking calls run on the caller's thread without a work handle.
  absl::Status Run(dist_collective_t kind, const dist_op_args_t& args,
                   absl::Duration timeout) override {
    return comm_->Run(kind, args, timeout);
  }
  // dist_all_to_all_v and dist_all_gather_v on Gloo's own alltoallv and
  // allgatherv; reduce_scatter_v goes back to the core (variable_counts.h).
  absl::Status RunVariable(dist_collective_t kind, const dist_op_args_t& args,
                           const dist_op_counts_t& counts, absl::Duration timeout) override {
    if (!RunsVariable(kind)) {
      return absl::UnimplementedError(
          absl::StrCat("gloo backend: the core builds ", dist_collective_name(kind), "_v"));
    }
    return comm_->RunVariable(kind, args, counts, timeout);
  }
  void Abort(const std::string& reason) override {
    comm_->Abort("gloo backend: communicator aborted: " + reason);
  }
  // Members make a new Gloo context on the parent's transport device,
  // meeting in the fresh store namespace the core made.
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> Split(
      const int32_t* ranks, size_t num_ranks, const dist_comm_config_t& config) override {
    if (config.rank < 0) return std::unique_ptr<dist::BackendComm>();
    return dist::WrapComm<GlooComm>(Communicator::Create(config, comm_->device()));
  }

 private:
  std::shared_ptr<Communicator> comm_;
};

class GlooBackend : public dist::Backend {
 public:
  const char* name() const override { return "gloo"; }
  const char* version() const override { return "1.0.0"; }
  const char* LibraryVersion() override {
    static const std::string* const text = new std::string(
        absl::StrCat("Gloo ", GLOO_VERSION_MAJOR, ".", GLOO_VERSION_MINOR, ".", GLOO_VERSION_PATCH,
                     " (pinned upstream 5b143513 with third_party/gloo patches, TCP transport)"));
    return text->c_str();
  }
  bool has_variable_counts() const override { return true; }
  void Capabilities(dist_backend_capabilities_t& caps) override {
    caps.device_types = 1u << DIST_DEVICE_CPU;
    caps.dtypes = dist::kAllDtypes;
    caps.collectives = dist::kAllCollectives;
    caps.all_reduce_ops = caps.reduce_ops = caps.reduce_scatter_ops = dist::kAllReduceOps;
    caps.flags = DIST_CAP_SUBGROUPS | DIST_CAP_THREAD_MULTIPLE | DIST_CAP_SHRINK;
    caps.notes = "CPU buffers over TCP; float16/bfloat16 reduce in float32";
  }
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> CreateComm(
      const dist_comm_config_t& config) override {
    return dist::WrapComm<GlooComm>(Communicator::Create(config, nullptr));
  }
};

}  // namespace
}  // namespace dist_gloo

DIST_EXPORT_BACKEND_PLUGIN(dist_gloo::GlooBackend)

// The Gloo backend's entry point: its Backend for the SDK's plugin adapter
// (dist/cpp/backend_adapter.hpp), which owns the C table, and its Transport
// for the SDK runtime (dist/cpp/runtime.hpp), which owns issue order, work
// handles, deadlines, abort and revoke.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "dist/cpp/backend_adapter.hpp"
#include "dist/cpp/runtime.hpp"
#include "gloo/config.h"
#include "plugins/backends/gloo/communicator.h"
#include "plugins/backends/gloo/variable_counts.h"

namespace dist_gloo {
namespace {

// The Gloo communicator under the SDK runtime (dist/cpp/runtime.hpp):
// collectives run to their end on the runtime's thread, send and recv are
// posted and left in flight.
class GlooTransport : public dist::Transport {
 public:
  explicit GlooTransport(std::shared_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  ~GlooTransport() override { comm_->Shutdown(); }

  absl::Status Check(dist_collective_t kind, const dist_op_args_t& args) override {
    return ValidateOp(kind, args, comm_->rank());
  }
  absl::Status Execute(const dist::Op& op, dist::OpContext& ctx) override {
    absl::StatusOr<Op> mine = Translate(op);
    if (!mine.ok()) return mine.status();
    absl::Status status = comm_->RunCollective(*mine);
    Revoked(status, ctx);
    return status;
  }
  // send and recv are only posted: on the issuing thread when nothing is
  // ahead of them, without waiting.
  bool StartsAtOnce(dist_collective_t kind) const override { return IsPointToPoint(kind); }
  absl::StatusOr<std::unique_ptr<dist::InFlight>> Start(const dist::Op& op, dist::OpContext& ctx,
                                                        Finish finish) override {
    if (!IsPointToPoint(op.kind)) return Transport::Start(op, ctx, std::move(finish));
    absl::StatusOr<std::unique_ptr<dist::InFlight>> posted =
        comm_->Post(*Translate(op), std::move(finish));
    if (!posted.ok()) Revoked(posted.status(), ctx);
    return posted;
  }
  // dist_all_to_all_v and dist_all_gather_v on Gloo's own alltoallv and
  // allgatherv; reduce_scatter_v goes back to the core (variable_counts.h).
  bool RunsVariableCounts(dist_collective_t kind) const override { return RunsVariable(kind); }
  void Interrupt(const absl::Status& why) override { comm_->Abort(std::string(why.message())); }
  // Members make a new Gloo context on the parent's transport device,
  // meeting in the fresh store namespace the core made.
  absl::StatusOr<std::unique_ptr<dist::Transport>> Split(
      const int32_t* /*ranks*/, size_t /*num_ranks*/, const dist_comm_config_t& config) override {
    if (config.rank < 0) return std::unique_ptr<dist::Transport>();
    absl::StatusOr<std::shared_ptr<Communicator>> child =
        Communicator::Create(config, comm_->device());
    if (!child.ok()) return child.status();
    return std::unique_ptr<dist::Transport>(new GlooTransport(*std::move(child)));
  }

 private:
  static bool IsPointToPoint(dist_collective_t kind) {
    return kind == DIST_COLL_SEND || kind == DIST_COLL_RECV;
  }
  // The plugin's form of an operation (variable counts checked and copied).
  absl::StatusOr<Op> Translate(const dist::Op& op) const {
    Op mine{op.kind, op.args, static_cast<int64_t>(op.seq) + 1, comm_->OpTimeout(op.args)};
    if (op.counts != nullptr) {
      absl::StatusOr<std::shared_ptr<const VariableCounts>> copied =
          CheckVariable(op.kind, op.args, *op.counts, comm_->rank(), comm_->size());
      if (!copied.ok()) return copied.status();
      mine.counts = *std::move(copied);
    }
    return mine;
  }
  // A failure aborted the communicator: later operations fail alike.
  void Revoked(const absl::Status& status, dist::OpContext& ctx) const {
    if (status.ok()) return;
    absl::Status aborted = comm_->AbortedStatus();
    if (!aborted.ok()) ctx.Revoke(aborted);
  }

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
    absl::StatusOr<std::shared_ptr<Communicator>> comm = Communicator::Create(config, nullptr);
    if (!comm.ok()) return comm.status();
    return dist::MakeRuntimeComm(config, std::make_unique<GlooTransport>(*std::move(comm)));
  }
};

}  // namespace
}  // namespace dist_gloo

DIST_EXPORT_BACKEND_PLUGIN(dist_gloo::GlooBackend)

// The shm backend's entry point: its Backend for the SDK's plugin adapter
// (dist/cpp/backend_adapter.hpp), which owns the C table, and its transport
// under the SDK runtime.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "communicator.h"
#include "dist/cpp/backend_adapter.hpp"
#include "dist/cpp/runtime.hpp"
#include "segment.h"
#include "validate.h"

namespace dist_shm {
namespace {

// The runtime (dist/cpp/runtime.hpp) owns issue order, work handles, abort
// and revoke; the transport runs collectives to their end and posts
// send/recv, which finish in flight.
class ShmTransport : public dist::Transport {
 public:
  explicit ShmTransport(std::unique_ptr<Communicator> comm) : comm_(std::move(comm)) {}

  absl::Status Check(dist_collective_t kind, const dist_op_args_t& args) override {
    return ValidateOp(kind, args, comm_->rank());
  }
  absl::Status Execute(const dist::Op& op, dist::OpContext& ctx) override {
    return comm_->RunCollective(op, ctx);
  }
  // A blocking call on an idle communicator: a collective runs here; a
  // send that fits its ring goes straight in, a recv whose message comes
  // within a spin straight out, with no record (the common small case).
  std::optional<absl::Status> RunNow(const dist::Op& op, dist::OpContext& ctx) override {
    if (op.kind == DIST_COLL_SEND) {
      if (comm_->SendNow(op.args)) return absl::OkStatus();
      return std::nullopt;
    }
    if (op.kind == DIST_COLL_RECV) {
      if (comm_->ReceiveNow(op.args, /*spin=*/true)) return absl::OkStatus();
      return std::nullopt;
    }
    return comm_->RunCollective(op, ctx);
  }
  // send/recv are posted (done at once when the message fits its ring, or
  // is there already), on the issuing thread when nothing is ahead of them.
  bool StartsAtOnce(dist_collective_t kind) const override { return IsPointToPoint(kind); }
  absl::StatusOr<std::unique_ptr<dist::InFlight>> Start(const dist::Op& op, dist::OpContext& ctx,
                                                        Finish finish) override {
    if (!IsPointToPoint(op.kind)) return Transport::Start(op, ctx, std::move(finish));
    const bool now = op.kind == DIST_COLL_SEND ? comm_->SendNow(op.args)
                                               : comm_->ReceiveNow(op.args, /*spin=*/false);
    if (now) return std::unique_ptr<dist::InFlight>();
    return comm_->Post(op, ctx, std::move(finish));
  }
  void Interrupt(const absl::Status& why) override { comm_->Interrupt(why); }
  // Members meet on a fresh segment through the new store namespace; the
  // parent's segment is not involved, so its pending work is unaffected.
  absl::StatusOr<std::unique_ptr<dist::Transport>> Split(
      const int32_t* /*ranks*/, size_t /*num_ranks*/, const dist_comm_config_t& config) override {
    if (config.rank < 0) return std::unique_ptr<dist::Transport>();
    return Make(config);
  }

  static absl::StatusOr<std::unique_ptr<dist::Transport>> Make(const dist_comm_config_t& config) {
    absl::StatusOr<std::unique_ptr<Communicator>> comm = Communicator::Create(config);
    if (!comm.ok()) return comm.status();
    return std::unique_ptr<dist::Transport>(new ShmTransport(*std::move(comm)));
  }

 private:
  static bool IsPointToPoint(dist_collective_t kind) {
    return kind == DIST_COLL_SEND || kind == DIST_COLL_RECV;
  }

  std::unique_ptr<Communicator> comm_;
};

class ShmBackend : public dist::Backend {
 public:
  const char* name() const override { return "shm"; }
  const char* version() const override { return "1.0.0"; }
  const char* LibraryVersion() override { return "POSIX shared memory with futex waits (Linux)"; }

  absl::Status Probe() override {  // can this process create a segment at all?
    // A fresh name: with a predictable one (the pid), another user could
    // create it first and make shm unavailable to this process.
    const std::string name = UniqueSegmentName("/dist-shm-probe-");
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      return absl::UnavailableError(
          absl::StrCat("shm: cannot create POSIX shared memory (shm_open ", name, ": ",
                       std::strerror(errno), "); mount a writable tmpfs on /dev/shm"));
    }
    close(fd);
    shm_unlink(name.c_str());
    return absl::OkStatus();
  }

  void Capabilities(dist_backend_capabilities_t& caps) override {
    caps.device_types = 1u << DIST_DEVICE_CPU;
    caps.dtypes = dist::kAllDtypes;
    caps.collectives = dist::kAllCollectives;
    caps.all_reduce_ops = caps.reduce_ops = caps.reduce_scatter_ops = dist::kAllReduceOps;
    caps.flags = DIST_CAP_SUBGROUPS | DIST_CAP_THREAD_MULTIPLE | DIST_CAP_SHRINK;
    caps.notes = "CPU buffers, all ranks on one host (POSIX shared memory)";
  }

  absl::StatusOr<std::unique_ptr<dist::BackendComm>> CreateComm(
      const dist_comm_config_t& config) override {
    absl::StatusOr<std::unique_ptr<dist::Transport>> transport = ShmTransport::Make(config);
    if (!transport.ok()) return transport.status();
    return dist::MakeRuntimeComm(config, *std::move(transport));
  }
};

}  // namespace
}  // namespace dist_shm

DIST_EXPORT_BACKEND_PLUGIN(dist_shm::ShmBackend)

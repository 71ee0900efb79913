// The shm backend's entry point: its Backend for the SDK's plugin adapter
// (dist/cpp/backend_adapter.hpp), which owns the C table.
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
#include "segment.h"

namespace dist_shm {
namespace {

class ShmWork : public dist::BackendWork {
 public:
  explicit ShmWork(std::shared_ptr<Work> work) : work_(std::move(work)) {}
  absl::Status Wait(absl::Duration timeout) override { return work_->Wait(timeout); }
  absl::Status Test(bool* done) override {
    absl::Status status;
    *done = work_->Test(&status);
    return status;
  }

 private:
  std::shared_ptr<Work> work_;
};

class ShmComm : public dist::BackendComm {
 public:
  explicit ShmComm(std::unique_ptr<Communicator> comm) : comm_(std::move(comm)) {}
  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->world_size(); }
  absl::StatusOr<std::unique_ptr<dist::BackendWork>> Issue(dist_collective_t kind,
                                                           const dist_op_args_t& args) override {
    absl::StatusOr<std::shared_ptr<Work>> work = comm_->Issue(kind, args);
    if (!work.ok()) return work.status();
    return std::make_unique<ShmWork>(*std::move(work));
  }
  absl::Status Run(dist_collective_t kind, const dist_op_args_t& args,
                   absl::Duration timeout) override {
    return comm_->Run(kind, args, timeout);
  }
  absl::Status RunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                           absl::Duration timeout) override {
    std::optional<absl::Status> here = comm_->TryRunSendRecv(send, recv, timeout);
    if (here.has_value()) return *std::move(here);
    return dist::BackendComm::RunSendRecv(send, recv, timeout);
  }
  void Abort(const std::string& reason) override { comm_->Abort(reason); }
  // Members meet on a fresh segment through the new store namespace; the
  // parent's segment is not involved, so its pending work is unaffected.
  absl::StatusOr<std::unique_ptr<dist::BackendComm>> Split(
      const int32_t* ranks, size_t num_ranks, const dist_comm_config_t& config) override {
    if (config.rank < 0) return std::unique_ptr<dist::BackendComm>();
    return dist::WrapComm<ShmComm>(Communicator::Create(config));
  }

 private:
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
    return dist::WrapComm<ShmComm>(Communicator::Create(config));
  }
};

}  // namespace
}  // namespace dist_shm

DIST_EXPORT_BACKEND_PLUGIN(dist_shm::ShmBackend)

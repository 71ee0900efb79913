// The MPI backend's C entry point: the ABI table and thin wrappers that turn
// absl::Status into dist_error_t and keep C++ exceptions inside.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"
#include "ops.h"
#include "progress.h"
#include "runtime.h"

struct dist_backend_comm {
  std::shared_ptr<dist_mpi::Comm> comm;
};

struct dist_backend_work {
  std::shared_ptr<dist_mpi::Comm> comm;
  std::shared_ptr<dist_mpi::PendingOp> op;
};

namespace dist_mpi {
namespace {

constexpr uint32_t kAll8 = 0xffu;

dist_error_t* Internal(const char* where) {
  return dist_error_new(DIST_INTERNAL, "mpi: unexpected C++ exception in %s; please report it",
                        where);
}

// Runs `body` (returning absl::Status) with exceptions contained.
template <typename Body>
dist_error_t* Guarded(const char* where, Body body) {
  try {
    return dist::ToError(body());
  } catch (...) {
    return Internal(where);
  }
}

absl::StatusOr<CommOptions> ParseOptions(const dist_comm_config_t& config) {
  CommOptions options;
  for (size_t i = 0; i < config.num_options; ++i) {
    const dist_kv_t& kv = config.options[i];
    if (kv.key == nullptr || !absl::StartsWith(kv.key, "mpi.")) continue;
    const std::string value = kv.value ? kv.value : "";
    const bool on = value == "1" || value == "true" || value == "on";
    const bool off = value == "0" || value == "false" || value == "off";
    if (!on && !off) {
      return absl::InvalidArgumentError(absl::StrCat("mpi: option ", kv.key, "=", value,
                                                     " is not a boolean; use 0 or 1"));
    }
    if (std::strcmp(kv.key, "mpi.abort_process") == 0) {
      options.abort_process = on;
    } else if (std::strcmp(kv.key, "mpi.progress_thread") == 0) {
      ProgressEngine::Get().set_enabled(on);  // read when MPI initializes
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "mpi: unknown option ", kv.key, "; known: mpi.abort_process, mpi.progress_thread"));
    }
  }
  return options;
}

dist_error_t* Initialize(const dist_host_api_t* host) {
  return Guarded("initialize", [&] { return Runtime::Get().Attach(host); });
}

const char* LibraryVersion() { return Runtime::Get().library_version(); }

// Whether `name` is an executable in PATH (or /usr/bin).
bool InPath(const char* name) {
  const char* path = std::getenv("PATH");
  std::string dirs = absl::StrCat(path ? path : "", ":/usr/bin");
  for (absl::string_view dir : absl::StrSplit(dirs, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

dist_error_t* Probe() {
  // Does not initialize MPI (a singleton init forks an orted). Under a
  // launcher, or with MPI already up, the backend can run; alone, it runs as
  // an MPI singleton of world size 1, which needs Open MPI's orted.
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized || Runtime::StartedByLauncher() || InPath("orted")) return nullptr;
  return dist_error_new(DIST_UNAVAILABLE,
                        "mpi: not started by an MPI launcher and Open MPI's orted (needed to run "
                        "as a singleton) is not in PATH; launch with `mpirun -np N <program>`");
}

void GetCapabilities(dist_backend_capabilities_t* caps) {
  if (caps == nullptr) return;
  Runtime& runtime = Runtime::Get();
  dist_backend_capabilities_t full;
  std::memset(&full, 0, sizeof(full));
  full.device_types = 1u << DIST_DEVICE_CPU;
  if (runtime.cuda_aware()) full.device_types |= 1u << DIST_DEVICE_CUDA;
  full.dtypes = kAll8;
  full.collectives = (1u << DIST_COLLECTIVE_COUNT) - 1;
  full.all_reduce_ops = kAll8;
  full.reduce_ops = kAll8;
  full.reduce_scatter_ops = kAll8;
  full.flags = DIST_CAP_SUBGROUPS | DIST_CAP_NEEDS_LAUNCHER;
  if (runtime.thread_multiple()) full.flags |= DIST_CAP_THREAD_MULTIPLE;
  if (runtime.cuda_aware()) full.flags |= DIST_CAP_CUDA_AWARE;
  full.notes = runtime.thread_notes();
  const size_t size = caps->struct_size < sizeof(full) ? caps->struct_size : sizeof(full);
  full.struct_size = caps->struct_size;
  std::memcpy(caps, &full, size);
}

dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** out) {
  return Guarded("comm_create", [&]() -> absl::Status {
    if (config == nullptr || out == nullptr) {
      return absl::InvalidArgumentError("mpi: comm_create needs a config and an out pointer");
    }
    *out = nullptr;
    absl::StatusOr<CommOptions> options = ParseOptions(*config);
    if (!options.ok()) return options.status();
    absl::StatusOr<std::shared_ptr<Comm>> comm = Comm::CreateWorld(*config, *options);
    if (!comm.ok()) return comm.status();
    *out = new dist_backend_comm{*std::move(comm)};
    return absl::OkStatus();
  });
}

dist_error_t* CommSplit(dist_backend_comm_t* parent, const int32_t* ranks, size_t num_ranks,
                        const dist_comm_config_t* config, dist_backend_comm_t** out) {
  return Guarded("comm_split", [&]() -> absl::Status {
    if (parent == nullptr || config == nullptr || out == nullptr ||
        (ranks == nullptr && num_ranks > 0)) {
      return absl::InvalidArgumentError("mpi: comm_split needs a parent, ranks, config and out");
    }
    *out = nullptr;
    absl::StatusOr<std::shared_ptr<Comm>> child = parent->comm->Split(ranks, num_ranks, *config);
    if (!child.ok()) return child.status();
    if (*child != nullptr) *out = new dist_backend_comm{*std::move(child)};
    return absl::OkStatus();
  });
}

void CommAbort(dist_backend_comm_t* comm, const char* reason) {
  if (comm == nullptr) return;
  try {
    comm->comm->Abort(reason ? reason : "");
  } catch (...) {
  }
}

void CommDestroy(dist_backend_comm_t* comm) {
  if (comm == nullptr) return;
  try {
    comm->comm->Destroy();
  } catch (...) {
  }
  delete comm;
}

template <OpResult (*Start)(Comm&, const dist_op_args_t&)>
dist_error_t* RunOp(dist_backend_comm_t* comm, const dist_op_args_t* args,
                    dist_backend_work_t** work) {
  return Guarded("an operation", [&]() -> absl::Status {
    if (comm == nullptr || args == nullptr || work == nullptr) {
      return absl::InvalidArgumentError("mpi: an operation needs a comm, args and a work pointer");
    }
    *work = nullptr;
    OpResult op = Start(*comm->comm, *args);
    if (!op.ok()) return op.status();
    *work = new dist_backend_work{comm->comm, *std::move(op)};
    return absl::OkStatus();
  });
}

dist_error_t* WorkWait(dist_backend_work_t* work, int64_t timeout_ms) {
  return Guarded("work_wait", [&]() -> absl::Status {
    if (work == nullptr) return absl::InvalidArgumentError("mpi: work_wait on a NULL work");
    const absl::Duration timeout =
        timeout_ms < 0 ? work->op->timeout : absl::Milliseconds(timeout_ms);
    return work->comm->Wait(*work->op, timeout);
  });
}

dist_error_t* WorkTest(dist_backend_work_t* work, int* done) {
  return Guarded("work_test", [&]() -> absl::Status {
    if (work == nullptr || done == nullptr) {
      return absl::InvalidArgumentError("mpi: work_test needs a work and a done pointer");
    }
    *done = work->comm->Test(*work->op) ? 1 : 0;
    if (!*done) return absl::OkStatus();
    // Done, or the group was aborted: Wait(0) returns the final status.
    return work->comm->Wait(*work->op, absl::ZeroDuration());
  });
}

void WorkDestroy(dist_backend_work_t* work) { delete work; }

const dist_backend_plugin_t kPlugin = {
    sizeof(dist_backend_plugin_t),
    DIST_BACKEND_ABI_MAJOR,
    DIST_BACKEND_ABI_MINOR,
    "mpi",
    "1.0.0",
    &Initialize,
    &LibraryVersion,
    &Probe,
    &GetCapabilities,
    &CommCreate,
    &CommSplit,
    &CommAbort,
    &CommDestroy,
    &RunOp<StartAllReduce>,
    &RunOp<StartBroadcast>,
    &RunOp<StartReduce>,
    &RunOp<StartAllGather>,
    &RunOp<StartGather>,
    &RunOp<StartScatter>,
    &RunOp<StartReduceScatter>,
    &RunOp<StartAllToAll>,
    &RunOp<StartBarrier>,
    &RunOp<StartSend>,
    &RunOp<StartRecv>,
    &WorkWait,
    &WorkTest,
    &WorkDestroy,
    nullptr,  // work_wait_stream: MPI does not order on CUDA streams
};

}  // namespace
}  // namespace dist_mpi

extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  return &dist_mpi::kPlugin;
}

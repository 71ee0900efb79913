// The C ABI of the nccl backend: converts between the plugin table of
// backend_plugin.h and the C++ classes, and keeps exceptions inside.
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"
#include "plugins/backends/nccl/bootstrap.h"
#include "plugins/backends/nccl/capabilities.h"
#include "plugins/backends/nccl/communicator.h"
#include "plugins/backends/nccl/log.h"
#include "plugins/backends/nccl/probe.h"
#include "plugins/backends/nccl/work_state.h"
#include "plugins/backends/nccl/work_wait.h"

struct dist_backend_comm {
  std::shared_ptr<dist::nccl::Communicator> impl;
};

struct dist_backend_work {
  std::shared_ptr<dist::nccl::WorkState> state;
  std::shared_ptr<dist::nccl::Communicator> comm;  // for health checks while waiting
};

namespace dist::nccl {
namespace {

// Runs `body` (returning absl::Status) so that no exception crosses the ABI.
template <typename Body>
dist_error_t* Guard(const char* what, Body&& body) {
  try {
    return ToError(body());
  } catch (const std::exception& e) {
    return dist_error_new(DIST_INTERNAL, "nccl %s: unexpected exception: %s", what, e.what());
  } catch (...) {
    return dist_error_new(DIST_INTERNAL, "nccl %s: unexpected exception", what);
  }
}

// Copies a caller's struct that may be older (smaller) than ours, zeroing
// the fields it lacks.
template <typename T>
T CopySized(const T* in) {
  T out;
  std::memset(&out, 0, sizeof(out));
  const size_t size = in->struct_size < sizeof(T) ? in->struct_size : sizeof(T);
  std::memcpy(&out, in, size);
  out.struct_size = sizeof(T);
  return out;
}

// Every field of these structs exists since ABI 1.0.
constexpr size_t kMinConfigSize = offsetof(dist_comm_config_t, device_index) + sizeof(int32_t);
constexpr size_t kMinArgsSize = offsetof(dist_op_args_t, timeout_ms) + sizeof(int64_t);

// The caller's struct must cover at least the fields every ABI version has
// (`required` bytes); a zero or garbage struct_size is a caller bug.
template <typename T>
absl::Status CheckSize(const T* in, size_t required, const char* what, const char* type) {
  if (in->struct_size >= required) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("nccl: ", what, "->struct_size is ",
                                                 in->struct_size, " but must be at least ",
                                                 required, "; set it to sizeof(", type, ")"));
}

dist_error_t* Initialize(const dist_host_api_t* host) {
  SetHost(host);
  return nullptr;
}

const char* LibraryVersion() {
  static const std::string* const text = new std::string(LibraryVersionText());
  return text->c_str();
}

dist_error_t* Probe() {
  return Guard("probe", [] { return CountCudaDevices().status(); });
}

void GetCapabilities(dist_backend_capabilities_t* caps) { FillCapabilities(caps); }

dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  return Guard("comm_create", [&]() -> absl::Status {
    if (config == nullptr || comm == nullptr) {
      return absl::InvalidArgumentError("nccl comm_create: config and comm must not be NULL");
    }
    *comm = nullptr;
    absl::Status size = CheckSize(config, kMinConfigSize, "config", "dist_comm_config_t");
    if (!size.ok()) return size;
    absl::StatusOr<std::shared_ptr<Communicator>> created = CreateCommunicator(CopySized(config));
    if (!created.ok()) return created.status();
    *comm = new dist_backend_comm{*std::move(created)};
    return absl::OkStatus();
  });
}

dist_error_t* CommSplit(dist_backend_comm_t* parent, const int32_t* ranks, size_t num_ranks,
                        const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  return Guard("comm_split", [&]() -> absl::Status {
    if (parent == nullptr || config == nullptr || comm == nullptr) {
      return absl::InvalidArgumentError(
          "nccl comm_split: parent, config and comm must not be NULL");
    }
    *comm = nullptr;
    (void)ranks;  // NCCL derives membership from each rank's color and key
    (void)num_ranks;
    absl::Status size = CheckSize(config, kMinConfigSize, "config", "dist_comm_config_t");
    if (!size.ok()) return size;
    absl::StatusOr<std::shared_ptr<Communicator>> child = parent->impl->Split(CopySized(config));
    if (!child.ok()) return child.status();
    if (*child != nullptr) *comm = new dist_backend_comm{*std::move(child)};
    return absl::OkStatus();
  });
}

void CommAbort(dist_backend_comm_t* comm, const char* reason) {
  if (comm == nullptr) return;
  try {
    comm->impl->AbortByCaller(reason != nullptr ? reason : "aborted by the caller");
  } catch (...) {
  }
}

void CommDestroy(dist_backend_comm_t* comm) {
  if (comm == nullptr) return;
  try {
    comm->impl->Shutdown();
  } catch (...) {
  }
  delete comm;
}

template <dist_collective_t kOp>
dist_error_t* StartOp(dist_backend_comm_t* comm, const dist_op_args_t* args,
                      dist_backend_work_t** work) {
  return Guard(dist_collective_name(kOp), [&]() -> absl::Status {
    if (comm == nullptr || args == nullptr || work == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("nccl ", dist_collective_name(kOp),
                                                     ": comm, args and work must not be NULL"));
    }
    *work = nullptr;
    absl::Status size = CheckSize(args, kMinArgsSize, "args", "dist_op_args_t");
    if (!size.ok()) return size;
    absl::StatusOr<std::shared_ptr<WorkState>> started = comm->impl->Start(kOp, CopySized(args));
    if (!started.ok()) return started.status();
    *work = new dist_backend_work{*std::move(started), comm->impl};
    return absl::OkStatus();
  });
}

dist_error_t* WorkWait(dist_backend_work_t* work, int64_t timeout_ms) {
  return Guard("work_wait", [&]() -> absl::Status {
    if (work == nullptr) return absl::InvalidArgumentError("nccl work_wait: work is NULL");
    return WaitForWork(*work->state, *work->comm,
                       absl::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
  });
}

dist_error_t* WorkTest(dist_backend_work_t* work, int* done) {
  return Guard("work_test", [&]() -> absl::Status {
    if (work == nullptr || done == nullptr) {
      return absl::InvalidArgumentError("nccl work_test: work and done must not be NULL");
    }
    Communicator& comm = *work->comm;
    std::optional<absl::Status> result = comm.Poll(*work->state);
    if (!result.has_value()) {
      comm.Check();  // a failure shows up on the next poll
      result = comm.Poll(*work->state);
    }
    *done = result.has_value() ? 1 : 0;
    return result.has_value() ? *result : absl::OkStatus();
  });
}

void WorkDestroy(dist_backend_work_t* work) { delete work; }

dist_error_t* WorkWaitStream(dist_backend_work_t* work, void* stream) {
  return Guard("work_wait_stream", [&]() -> absl::Status {
    if (work == nullptr) return absl::InvalidArgumentError("nccl work_wait_stream: work is NULL");
    return WaitOnStream(*work->state, *work->comm, stream);
  });
}

dist_backend_plugin_t MakeTable() {
  dist_backend_plugin_t table;
  std::memset(&table, 0, sizeof(table));
  table.struct_size = sizeof(table);
  table.abi_major = DIST_BACKEND_ABI_MAJOR;
  table.abi_minor = DIST_BACKEND_ABI_MINOR;
  table.name = "nccl";
  table.version = "1.0.0";
  table.initialize = Initialize;
  table.library_version = LibraryVersion;
  table.probe = Probe;
  table.get_capabilities = GetCapabilities;
  table.comm_create = CommCreate;
  table.comm_split = CommSplit;
  table.comm_abort = CommAbort;
  table.comm_destroy = CommDestroy;
  table.all_reduce = StartOp<DIST_COLL_ALL_REDUCE>;
  table.broadcast = StartOp<DIST_COLL_BROADCAST>;
  table.reduce = StartOp<DIST_COLL_REDUCE>;
  table.all_gather = StartOp<DIST_COLL_ALL_GATHER>;
  table.gather = StartOp<DIST_COLL_GATHER>;
  table.scatter = StartOp<DIST_COLL_SCATTER>;
  table.reduce_scatter = StartOp<DIST_COLL_REDUCE_SCATTER>;
  table.all_to_all = StartOp<DIST_COLL_ALL_TO_ALL>;
  table.barrier = StartOp<DIST_COLL_BARRIER>;
  table.send = StartOp<DIST_COLL_SEND>;
  table.recv = StartOp<DIST_COLL_RECV>;
  table.work_wait = WorkWait;
  table.work_test = WorkTest;
  table.work_destroy = WorkDestroy;
  table.work_wait_stream = WorkWaitStream;
  return table;
}

}  // namespace
}  // namespace dist::nccl

extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static const dist_backend_plugin_t table = dist::nccl::MakeTable();
  return &table;
}

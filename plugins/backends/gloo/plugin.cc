// The C ABI of the Gloo backend: the table dist_backend_plugin_v1 returns.
// Every entry point catches everything: no exception crosses the ABI.
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"
#include "gloo/config.h"
#include "plugins/backends/gloo/communicator.h"
#include "plugins/backends/gloo/log.h"
#include "plugins/backends/gloo/work.h"

struct dist_backend_comm {
  std::shared_ptr<dist::gloo_backend::Communicator> comm;
};

struct dist_backend_work {
  std::shared_ptr<dist::gloo_backend::Work> work;
  std::weak_ptr<dist::gloo_backend::Communicator> comm;  // for waiting inline
};

namespace dist::gloo_backend {
namespace {

#define DIST_GLOO_STR2(x) #x
#define DIST_GLOO_STR(x) DIST_GLOO_STR2(x)
constexpr char kLibraryVersion[] = "Gloo " DIST_GLOO_STR(GLOO_VERSION_MAJOR) "." DIST_GLOO_STR(
    GLOO_VERSION_MINOR) "." DIST_GLOO_STR(GLOO_VERSION_PATCH) " (TCP transport)";

dist_error_t* Internal(const char* where, const char* what) {
  return dist_error_new(DIST_INTERNAL, "gloo backend: unexpected exception in %s: %s; please report this", where,
                        what);
}

// Runs `body`, turning any exception into an INTERNAL error.
template <typename F>
dist_error_t* Guard(const char* where, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Internal(where, e.what());
  } catch (...) {
    return Internal(where, "unknown exception");
  }
}

dist_error_t* Initialize(const dist_host_api_t* host) {
  SetHost(host);
  return nullptr;
}

const char* LibraryVersion() { return kLibraryVersion; }

dist_error_t* Probe() { return nullptr; }

void GetCapabilities(dist_backend_capabilities_t* caps) {
  if (caps == nullptr) return;
  dist_backend_capabilities_t full;
  std::memset(&full, 0, sizeof(full));
  full.struct_size = caps->struct_size;
  full.device_types = 1u << DIST_DEVICE_CPU;
  full.dtypes = (1u << DIST_DTYPE_COUNT) - 1;
  full.collectives = (1u << DIST_COLLECTIVE_COUNT) - 1;
  full.all_reduce_ops = (1u << DIST_REDUCE_OP_COUNT) - 1;
  full.reduce_ops = full.all_reduce_ops;
  full.reduce_scatter_ops = full.all_reduce_ops;
  full.flags = DIST_CAP_SUBGROUPS | DIST_CAP_THREAD_MULTIPLE;
  full.notes = "CPU buffers over TCP; float16/bfloat16 reduce in float32";
  const size_t n = caps->struct_size < sizeof(full) ? caps->struct_size : sizeof(full);
  std::memcpy(caps, &full, n);
}

dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** out) {
  return Guard("comm_create", [&]() -> dist_error_t* {
    if (config == nullptr || out == nullptr) {
      return dist_error_new(DIST_INVALID_ARGUMENT, "gloo backend: comm_create needs a config and an output pointer");
    }
    *out = nullptr;
    absl::StatusOr<std::shared_ptr<Communicator>> comm = Communicator::Create(*config, nullptr);
    if (!comm.ok()) return ToError(comm.status());
    *out = new dist_backend_comm{*std::move(comm)};
    return nullptr;
  });
}

dist_error_t* CommSplit(dist_backend_comm_t* parent, const int32_t* ranks, size_t num_ranks,
                        const dist_comm_config_t* config, dist_backend_comm_t** out) {
  return Guard("comm_split", [&]() -> dist_error_t* {
    if (parent == nullptr || config == nullptr || out == nullptr) {
      return dist_error_new(DIST_INVALID_ARGUMENT, "gloo backend: comm_split needs a parent, a config and an output pointer");
    }
    *out = nullptr;
    if (config->rank < 0) return nullptr;  // not a member
    // A new Gloo context among the members, on the parent's transport
    // device, meeting in the fresh store namespace the core made.
    absl::StatusOr<std::shared_ptr<Communicator>> comm = Communicator::Create(*config, parent->comm->device());
    if (!comm.ok()) return ToError(comm.status());
    *out = new dist_backend_comm{*std::move(comm)};
    return nullptr;
  });
}

void CommAbort(dist_backend_comm_t* comm, const char* reason) {
  if (comm == nullptr) return;
  try {
    comm->comm->Abort(absl::StrCat("gloo backend: communicator aborted: ",
                                   reason != nullptr && reason[0] ? reason : "no reason given"));
  } catch (...) {
  }
}

void CommDestroy(dist_backend_comm_t* comm) {
  if (comm == nullptr) return;
  try {
    comm->comm->Shutdown();
  } catch (...) {
  }
  delete comm;
}

dist_error_t* Issue(dist_collective_t kind, dist_backend_comm_t* comm, const dist_op_args_t* args,
                    dist_backend_work_t** work) {
  return Guard(dist_collective_name(kind), [&]() -> dist_error_t* {
    if (comm == nullptr || args == nullptr || work == nullptr) {
      return dist_error_new(DIST_INVALID_ARGUMENT, "gloo backend: %s needs a communicator, arguments and a work pointer",
                            dist_collective_name(kind));
    }
    *work = nullptr;
    dist_op_args_t copy;
    std::memset(&copy, 0, sizeof(copy));
    std::memcpy(&copy, args, args->struct_size < sizeof(copy) ? args->struct_size : sizeof(copy));
    absl::StatusOr<std::shared_ptr<Work>> queued = comm->comm->Enqueue(kind, copy);
    if (!queued.ok()) return ToError(queued.status());
    *work = new dist_backend_work{*std::move(queued), comm->comm};
    return nullptr;
  });
}

template <dist_collective_t kKind>
dist_error_t* IssueOp(dist_backend_comm_t* comm, const dist_op_args_t* args, dist_backend_work_t** work) {
  return Issue(kKind, comm, args, work);
}

dist_error_t* WorkWait(dist_backend_work_t* work, int64_t timeout_ms) {
  return Guard("work_wait", [&]() -> dist_error_t* {
    if (work == nullptr) return dist_error_new(DIST_INVALID_ARGUMENT, "gloo backend: work_wait on a NULL work");
    const absl::Duration timeout = timeout_ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(timeout_ms);
    if (!work->work->done()) {
      if (std::shared_ptr<Communicator> comm = work->comm.lock()) {
        if (!comm->TryRunInline(work->work, timeout)) comm->Poke();
      }
    }
    return ToError(work->work->Wait(timeout));
  });
}

dist_error_t* WorkTest(dist_backend_work_t* work, int* done) {
  return Guard("work_test", [&]() -> dist_error_t* {
    if (work == nullptr || done == nullptr) {
      return dist_error_new(DIST_INVALID_ARGUMENT, "gloo backend: work_test needs a work and a done pointer");
    }
    bool finished = false;
    absl::Status status = work->work->Test(&finished);
    if (!finished) {
      if (std::shared_ptr<Communicator> comm = work->comm.lock()) comm->Poke();  // make progress
    }
    *done = finished ? 1 : 0;
    return ToError(status);
  });
}

void WorkDestroy(dist_backend_work_t* work) { delete work; }

dist_backend_plugin_t MakeTable() {
  dist_backend_plugin_t t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.abi_major = DIST_BACKEND_ABI_MAJOR;
  t.abi_minor = DIST_BACKEND_ABI_MINOR;
  t.name = "gloo";
  t.version = "1.0.0";
  t.initialize = &Initialize;
  t.library_version = &LibraryVersion;
  t.probe = &Probe;
  t.get_capabilities = &GetCapabilities;
  t.comm_create = &CommCreate;
  t.comm_split = &CommSplit;
  t.comm_abort = &CommAbort;
  t.comm_destroy = &CommDestroy;
  t.all_reduce = &IssueOp<DIST_COLL_ALL_REDUCE>;
  t.broadcast = &IssueOp<DIST_COLL_BROADCAST>;
  t.reduce = &IssueOp<DIST_COLL_REDUCE>;
  t.all_gather = &IssueOp<DIST_COLL_ALL_GATHER>;
  t.gather = &IssueOp<DIST_COLL_GATHER>;
  t.scatter = &IssueOp<DIST_COLL_SCATTER>;
  t.reduce_scatter = &IssueOp<DIST_COLL_REDUCE_SCATTER>;
  t.all_to_all = &IssueOp<DIST_COLL_ALL_TO_ALL>;
  t.barrier = &IssueOp<DIST_COLL_BARRIER>;
  t.send = &IssueOp<DIST_COLL_SEND>;
  t.recv = &IssueOp<DIST_COLL_RECV>;
  t.work_wait = &WorkWait;
  t.work_test = &WorkTest;
  t.work_destroy = &WorkDestroy;
  t.work_wait_stream = nullptr;
  return t;
}

}  // namespace
}  // namespace dist::gloo_backend

extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static const dist_backend_plugin_t table = dist::gloo_backend::MakeTable();
  return &table;
}

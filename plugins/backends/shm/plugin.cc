// The shm backend's C ABI table: thin wrappers that convert between the C
// structs and the C++ classes. No exception crosses this boundary.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>

#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"
#include "communicator.h"

struct dist_backend_comm {
  std::unique_ptr<dist_shm::Communicator> impl;
};

struct dist_backend_work {
  std::shared_ptr<dist_shm::Work> impl;
};

namespace dist_shm {
namespace {

const dist_host_api_t* g_host = nullptr;

template <typename T>
T CopyIn(const T* in) {
  T out;
  std::memset(&out, 0, sizeof(out));
  const size_t size = in->struct_size == 0 ? sizeof(T) : std::min(in->struct_size, sizeof(T));
  std::memcpy(&out, in, size);
  out.struct_size = sizeof(T);
  return out;
}

dist_error_t* Internal(const char* where, const std::exception* e) {
  return dist_error_new(DIST_INTERNAL, "shm: %s threw %s; this is a bug in the shm plugin", where,
                        e ? e->what() : "an unknown exception");
}

dist_error_t* Initialize(const dist_host_api_t* host) {
  g_host = host;
  return nullptr;
}

const char* LibraryVersion() { return "POSIX shared memory with futex waits (Linux)"; }

dist_error_t* Probe() {
  // Can this process create a segment at all?
  const std::string name = absl::StrCat("/dist-shm-probe-", getpid());
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    return dist_error_new(DIST_UNAVAILABLE,
                          "shm: cannot create POSIX shared memory (shm_open %s: %s); mount "
                          "a writable tmpfs on /dev/shm",
                          name.c_str(), std::strerror(errno));
  }
  close(fd);
  shm_unlink(name.c_str());
  return nullptr;
}

void GetCapabilities(dist_backend_capabilities_t* caps) {
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
  full.notes = "CPU buffers, all ranks on one host (POSIX shared memory)";
  std::memcpy(caps, &full, std::min(caps->struct_size, sizeof(full)));
}

dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  try {
    *comm = nullptr;
    absl::StatusOr<std::unique_ptr<Communicator>> created =
        Communicator::Create(CopyIn(config), g_host);
    if (!created.ok()) return dist::ToError(created.status());
    *comm = new dist_backend_comm{*std::move(created)};
    return nullptr;
  } catch (const std::exception& e) {
    return Internal("comm_create", &e);
  } catch (...) {
    return Internal("comm_create", nullptr);
  }
}

dist_error_t* CommSplit(dist_backend_comm_t* parent, const int32_t* ranks, size_t num_ranks,
                        const dist_comm_config_t* config, dist_backend_comm_t** comm) {
  *comm = nullptr;
  // Members meet on a fresh segment through the new store namespace; the
  // parent's segment is not involved, so its pending work is unaffected.
  if (config->rank < 0) return nullptr;
  return CommCreate(config, comm);
}

void CommAbort(dist_backend_comm_t* comm, const char* reason) {
  if (comm == nullptr) return;
  try {
    comm->impl->Abort(reason ? reason : "comm_abort");
  } catch (...) {
  }
}

void CommDestroy(dist_backend_comm_t* comm) {
  try {
    delete comm;
  } catch (...) {
  }
}

template <dist_collective_t kCollective>
dist_error_t* Op(dist_backend_comm_t* comm, const dist_op_args_t* args,
                 dist_backend_work_t** work) {
  try {
    *work = nullptr;
    absl::StatusOr<std::shared_ptr<Work>> issued = comm->impl->Issue(kCollective, CopyIn(args));
    if (!issued.ok()) return dist::ToError(issued.status());
    *work = new dist_backend_work{*std::move(issued)};
    return nullptr;
  } catch (const std::exception& e) {
    return Internal(dist_collective_name(kCollective), &e);
  } catch (...) {
    return Internal(dist_collective_name(kCollective), nullptr);
  }
}

dist_error_t* WorkWait(dist_backend_work_t* work, int64_t timeout_ms) {
  try {
    return dist::ToError(work->impl->Wait(absl::Milliseconds(std::max<int64_t>(0, timeout_ms))));
  } catch (const std::exception& e) {
    return Internal("work_wait", &e);
  } catch (...) {
    return Internal("work_wait", nullptr);
  }
}

dist_error_t* WorkTest(dist_backend_work_t* work, int* done) {
  try {
    absl::Status status;
    *done = work->impl->Test(&status) ? 1 : 0;
    return dist::ToError(status);
  } catch (const std::exception& e) {
    return Internal("work_test", &e);
  } catch (...) {
    return Internal("work_test", nullptr);
  }
}

void WorkDestroy(dist_backend_work_t* work) { delete work; }

const dist_backend_plugin_t kPlugin = {
    sizeof(dist_backend_plugin_t),
    DIST_BACKEND_ABI_MAJOR,
    DIST_BACKEND_ABI_MINOR,
    "shm",
    "1.0.0",
    Initialize,
    LibraryVersion,
    Probe,
    GetCapabilities,
    CommCreate,
    CommSplit,
    CommAbort,
    CommDestroy,
    Op<DIST_COLL_ALL_REDUCE>,
    Op<DIST_COLL_BROADCAST>,
    Op<DIST_COLL_REDUCE>,
    Op<DIST_COLL_ALL_GATHER>,
    Op<DIST_COLL_GATHER>,
    Op<DIST_COLL_SCATTER>,
    Op<DIST_COLL_REDUCE_SCATTER>,
    Op<DIST_COLL_ALL_TO_ALL>,
    Op<DIST_COLL_BARRIER>,
    Op<DIST_COLL_SEND>,
    Op<DIST_COLL_RECV>,
    WorkWait,
    WorkTest,
    WorkDestroy,
    nullptr,  // work_wait_stream: CPU only
};

}  // namespace
}  // namespace dist_shm

extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  return &dist_shm::kPlugin;
}

// dist SDK, C++ side: the adapter between the backend plugin table of
// backend_plugin.h and a plugin's C++ code. A plugin implements Backend,
// BackendComm and BackendWork below and exports its table with one line:
//
//     DIST_EXPORT_BACKEND_PLUGIN(MyBackend)  // MyBackend: a Backend
//
// The adapter owns, once for every plugin: the table (filled field by field
// over a zeroed one), the struct_size rule of sdk/ABI.md for the config and
// the operation arguments (dist/cpp/abi_struct.hpp), the exception guard
// (dist/cpp/guard.hpp), host logging (dist/cpp/host_log.hpp), NULL-pointer
// checks, and the common argument checks of dist/cpp/validate.hpp (the
// buffer rule of backend_plugin.h, the same checks the core makes), so that
// every backend answers a bad call alike. A plugin's own checks (device type,
// which dtypes its library takes) stay in its Issue.
#ifndef DIST_CPP_BACKEND_ADAPTER_HPP_
#define DIST_CPP_BACKEND_ADAPTER_HPP_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/abi_struct.hpp"
#include "dist/cpp/guard.hpp"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/sendrecv_order.hpp"
#include "dist/cpp/status.hpp"
#include "dist/cpp/validate.hpp"

// The opaque work handle of backend_plugin.h, as this adapter defines it: the
// base of every BackendWork, so that the handle the core holds is the work
// itself (one allocation per operation, not a handle that holds a pointer).
struct dist_backend_work {
  virtual ~dist_backend_work() = default;
};

namespace dist {

// One issued operation. Destroying the handle never cancels the operation.
class BackendWork : public dist_backend_work {
 public:
  // Blocks up to `timeout` (always finite); the operation's status,
  // DEADLINE_EXCEEDED when the timeout passes first (may be called again).
  virtual absl::Status Wait(absl::Duration timeout) = 0;
  // Non-blocking: sets *done; once done, returns the operation's status.
  virtual absl::Status Test(bool* done) = 0;
  // Makes `stream` wait for the work (CUDA); only with has_wait_stream().
  virtual absl::Status WaitStream(void* /*stream*/) {
    return absl::UnimplementedError("work_wait_stream is not supported by this backend");
  }
};

// One communicator. Its destructor is comm_destroy: it waits for outstanding
// work up to the communicator's timeout, then frees.
class BackendComm {
 public:
  virtual ~BackendComm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Starts one operation; `args` passed the common checks for this rank.
  virtual absl::StatusOr<std::unique_ptr<BackendWork>> Issue(dist_collective_t kind,
                                                             const dist_op_args_t& args) = 0;
  // Runs one operation to its end (the table's `run`, for blocking calls):
  // Issue, then Wait up to `timeout`. A backend overrides it to run the
  // operation on the calling thread without a work handle when it can.
  virtual absl::Status Run(dist_collective_t kind, const dist_op_args_t& args,
                           absl::Duration timeout) {
    absl::StatusOr<std::unique_ptr<BackendWork>> work = Issue(kind, args);
    if (!work.ok()) return work.status();
    return (*work)->Wait(timeout);
  }
  // A send and a recv issued together and waited for (the table's
  // `run_sendrecv`, for dist_sendrecv): Issue both, then Wait for both
  // within `timeout`; the first error wins. A backend overrides it to move
  // both on the calling thread without work handles when it can.
  virtual absl::Status RunSendRecv(const dist_op_args_t& send, const dist_op_args_t& recv,
                                   absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::StatusOr<std::unique_ptr<BackendWork>> sent = absl::UnknownError("not issued");
    absl::StatusOr<std::unique_ptr<BackendWork>> received = absl::UnknownError("not issued");
    // Both are issued even when one is refused (the peers' operations
    // need their matches), in SendRecvSendsFirst's order.
    if (SendRecvSendsFirst(rank(), send.peer)) {
      sent = Issue(DIST_COLL_SEND, send);
      received = Issue(DIST_COLL_RECV, recv);
    } else {
      received = Issue(DIST_COLL_RECV, recv);
      sent = Issue(DIST_COLL_SEND, send);
    }
    absl::Status status = sent.ok() ? (*sent)->Wait(timeout) : sent.status();
    absl::Status recv_status =
        received.ok() ? (*received)->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration()))
                      : received.status();
    return status.ok() ? recv_status : status;
  }
  // One variable-count collective to its end (the table's `run_v`, set
  // when the Backend's has_variable_counts() is true): `counts` as
  // dist/backend_plugin.h describes, checked by the core. UNIMPLEMENTED
  // hands `kind` back to the core (the same answer on every rank).
  virtual absl::Status RunVariable(dist_collective_t /*kind*/, const dist_op_args_t& /*args*/,
                                   const dist_op_counts_t& /*counts*/, absl::Duration /*timeout*/) {
    return absl::UnimplementedError("the core builds the variable-count collectives");
  }
  // Fails pending and later operations with ABORTED carrying `reason` and
  // unblocks every waiter. Thread-safe, idempotent.
  virtual void Abort(const std::string& reason) = 0;
  // comm_split on every rank of this communicator; on non-members
  // config.rank is -1 and the result must be nullptr. `ranks`: parent ranks,
  // ascending. Called only when the backend's has_split() is true.
  virtual absl::StatusOr<std::unique_ptr<BackendComm>> Split(const int32_t* /*ranks*/,
                                                             size_t /*num_ranks*/,
                                                             const dist_comm_config_t& /*config*/) {
    return absl::UnimplementedError("comm_split is not supported by this backend");
  }
};

// The plugin itself: one instance per process, made on first use of the
// entry symbol.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;      // static, [a-z0-9_]+
  virtual const char* version() const = 0;   // static, the plugin's own version
  virtual const char* LibraryVersion() = 0;  // static or process-lived text
  // After the adapter remembered `host` for logging.
  virtual absl::Status Initialize(const dist_host_api_t* /*host*/) { return absl::OkStatus(); }
  // OK when the backend can run here; UNAVAILABLE with the reason otherwise.
  virtual absl::Status Probe() { return absl::OkStatus(); }
  // Fills a zeroed, full-size struct; the adapter copies what the caller has room for.
  virtual void Capabilities(dist_backend_capabilities_t& caps) = 0;
  virtual absl::StatusOr<std::unique_ptr<BackendComm>> CreateComm(
      const dist_comm_config_t& config) = 0;
  // Whether the table offers comm_split (else the core calls comm_create on
  // the members) and work_wait_stream.
  virtual bool has_split() const { return true; }
  virtual bool has_wait_stream() const { return false; }
  // Whether BackendComm::RunVariable runs some variable-count collectives
  // itself (the table's run_v).
  virtual bool has_variable_counts() const { return false; }
};

// Capability masks with every bit of their enum set.
constexpr uint32_t kAllDtypes = (1u << DIST_DTYPE_COUNT) - 1;
constexpr uint32_t kAllCollectives = (1u << DIST_COLLECTIVE_COUNT) - 1;
constexpr uint32_t kAllReduceOps = (1u << DIST_REDUCE_OP_COUNT) - 1;

// Wraps a plugin's communicator (a StatusOr of a pointer, NULL on a
// non-member of a split) in its BackendComm `Wrapper`, built from the pointer.
template <typename Wrapper, typename Pointer>
absl::StatusOr<std::unique_ptr<BackendComm>> WrapComm(absl::StatusOr<Pointer> comm) {
  if (!comm.ok()) return comm.status();
  if (*comm == nullptr) return std::unique_ptr<BackendComm>();
  return std::unique_ptr<BackendComm>(new Wrapper(*std::move(comm)));
}

}  // namespace dist

// The opaque communicator handle of backend_plugin.h, as this adapter
// defines it.
struct dist_backend_comm {
  std::unique_ptr<dist::BackendComm> impl;
};

namespace dist {
namespace internal {

// The process's one Backend (set by the entry symbol before any call).
inline Backend*& TheBackend() {
  static Backend* backend = nullptr;
  return backend;
}

// "backend" before the entry symbol ran (a runtime used on its own, in tests).
inline const char* BackendName() {
  return TheBackend() != nullptr ? TheBackend()->name() : "backend";
}

// Every handle this adapter hands out is a BackendWork (Issue).
inline BackendWork& Impl(dist_backend_work_t* work) { return *static_cast<BackendWork*>(work); }

inline absl::Status NullArgument(const char* where, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat(BackendName(), ": ", where, ": ", what, " must not be NULL"));
}

// "gloo: " before a message from a common check.
inline absl::Status Prefixed(const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(BackendName(), ": ", status.message()));
}

inline dist_error_t* Initialize(const dist_host_api_t* host) {
  SetHost(host, BackendName());
  return Guard(BackendName(), "initialize", [&] { return TheBackend()->Initialize(host); });
}

inline const char* LibraryVersion() {
  try {
    return TheBackend()->LibraryVersion();
  } catch (...) {
    return "unknown (library_version failed)";
  }
}

inline dist_error_t* Probe() {
  return Guard(BackendName(), "probe", [] { return TheBackend()->Probe(); });
}

inline void GetCapabilities(dist_backend_capabilities_t* caps) {
  if (caps == nullptr) return;
  GuardVoid(BackendName(), "get_capabilities", [&] {
    dist_backend_capabilities_t full{};
    TheBackend()->Capabilities(full);
    WriteCallerStruct(full, caps);
  });
}

inline dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm_t** out) {
  return Guard(BackendName(), "comm_create", [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("comm_create", "the output pointer");
    *out = nullptr;
    absl::StatusOr<dist_comm_config_t> read = ReadCallerStruct(config, "config");
    if (!read.ok()) return Prefixed(read.status());
    absl::StatusOr<std::unique_ptr<BackendComm>> comm = TheBackend()->CreateComm(*read);
    if (!comm.ok()) return comm.status();
    *out = new dist_backend_comm{*std::move(comm)};
    return absl::OkStatus();
  });
}

inline dist_error_t* CommSplit(dist_backend_comm_t* parent, const int32_t* ranks, size_t num_ranks,
                               const dist_comm_config_t* config, dist_backend_comm_t** out) {
  return Guard(BackendName(), "comm_split", [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("comm_split", "the output pointer");
    *out = nullptr;
    if (parent == nullptr) return NullArgument("comm_split", "the parent communicator");
    if (ranks == nullptr && num_ranks > 0) return NullArgument("comm_split", "ranks");
    absl::StatusOr<dist_comm_config_t> read = ReadCallerStruct(config, "config");
    if (!read.ok()) return Prefixed(read.status());
    absl::StatusOr<std::unique_ptr<BackendComm>> child =
        parent->impl->Split(ranks, num_ranks, *read);
    if (!child.ok()) return child.status();
    if (*child != nullptr) *out = new dist_backend_comm{*std::move(child)};
    return absl::OkStatus();
  });
}

inline void CommAbort(dist_backend_comm_t* comm, const char* reason) {
  if (comm == nullptr) return;
  GuardVoid(BackendName(), "comm_abort", [&] {
    comm->impl->Abort(reason != nullptr && reason[0] != '\0' ? reason : "no reason given");
  });
}

inline void CommDestroy(dist_backend_comm_t* comm) {
  GuardVoid(BackendName(), "comm_destroy", [&] { delete comm; });
}

// The caller's argument block, checked (unless the caller, the core, says
// it checked them the same way already): `args` itself when it is this
// version's struct, the common case, so a small call copies nothing; else
// a copy in `storage` read by its struct_size.
inline absl::StatusOr<const dist_op_args_t*> CheckedArgs(dist_collective_t kind, BackendComm& impl,
                                                         const dist_op_args_t* args,
                                                         dist_op_args_t* storage) {
  const dist_op_args_t* read = args;
  if (args == nullptr || args->struct_size != sizeof(dist_op_args_t)) {
    absl::StatusOr<dist_op_args_t> copied = ReadCallerStruct(args, "args");
    if (!copied.ok()) return Prefixed(copied.status());
    *storage = *copied;
    read = storage;
  }
  if ((read->flags & DIST_OP_ARGS_CHECKED) == 0) {
    DIST_RETURN_IF_ERROR(Prefixed(ValidateOpArgs(kind, *read, impl.rank(), impl.world_size())));
  }
  return read;
}

// The trampoline of every operation: checks, then the backend's Issue.
template <dist_collective_t kKind>
dist_error_t* Issue(dist_backend_comm_t* comm, const dist_op_args_t* args,
                    dist_backend_work_t** work) {
  const char* op = dist_collective_name(kKind);
  return Guard(BackendName(), op, [&]() -> absl::Status {
    if (work == nullptr) return NullArgument(op, "the work pointer");
    *work = nullptr;
    if (comm == nullptr) return NullArgument(op, "the communicator");
    BackendComm& impl = *comm->impl;
    dist_op_args_t storage;
    absl::StatusOr<const dist_op_args_t*> checked = CheckedArgs(kKind, impl, args, &storage);
    if (!checked.ok()) return checked.status();
    absl::StatusOr<std::unique_ptr<BackendWork>> issued = impl.Issue(kKind, **checked);
    if (!issued.ok()) return issued.status();
    *work = issued->release();
    return absl::OkStatus();
  });
}

// The table's `run`: the same checks, then the backend's Run.
inline dist_error_t* Run(dist_backend_comm_t* comm, dist_collective_t kind,
                         const dist_op_args_t* args, int64_t timeout_ms) {
  if (static_cast<unsigned>(kind) >= DIST_COLLECTIVE_COUNT) {
    return Guard(BackendName(), "run", [&]() -> absl::Status {
      return absl::InvalidArgumentError(
          absl::StrCat(BackendName(), ": run: ", static_cast<int>(kind), " is not an operation"));
    });
  }
  const char* op = dist_collective_name(kind);
  return Guard(BackendName(), op, [&]() -> absl::Status {
    if (comm == nullptr) return NullArgument(op, "the communicator");
    BackendComm& impl = *comm->impl;
    dist_op_args_t storage;
    absl::StatusOr<const dist_op_args_t*> checked = CheckedArgs(kind, impl, args, &storage);
    if (!checked.ok()) return checked.status();
    // The core always passes a bound; a negative one is treated as 0.
    return impl.Run(kind, **checked, absl::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
  });
}

// The table's `run_sendrecv`: both argument structs checked, then the
// backend's RunSendRecv.
inline dist_error_t* RunSendRecv(dist_backend_comm_t* comm, const dist_op_args_t* send,
                                 const dist_op_args_t* recv, int64_t timeout_ms) {
  return Guard(BackendName(), "sendrecv", [&]() -> absl::Status {
    if (comm == nullptr) return NullArgument("sendrecv", "the communicator");
    BackendComm& impl = *comm->impl;
    dist_op_args_t send_storage;
    absl::StatusOr<const dist_op_args_t*> checked_send =
        CheckedArgs(DIST_COLL_SEND, impl, send, &send_storage);
    if (!checked_send.ok()) return checked_send.status();
    dist_op_args_t recv_storage;
    absl::StatusOr<const dist_op_args_t*> checked_recv =
        CheckedArgs(DIST_COLL_RECV, impl, recv, &recv_storage);
    if (!checked_recv.ok()) return checked_recv.status();
    // The core always passes a bound; a negative one is treated as 0.
    return impl.RunSendRecv(**checked_send, **checked_recv,
                            absl::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
  });
}

// The table's `run_v`: the core checked the counts; the backend's RunVariable.
inline dist_error_t* RunV(dist_backend_comm_t* comm, dist_collective_t kind,
                          const dist_op_args_t* args, const dist_op_counts_t* counts,
                          int64_t timeout_ms) {
  return Guard(BackendName(), "run_v", [&]() -> absl::Status {
    if (comm == nullptr) return NullArgument("run_v", "the communicator");
    if (args == nullptr) return NullArgument("run_v", "args");
    if (counts == nullptr || counts->struct_size < sizeof(dist_op_counts_t) ||
        counts->recv_counts == nullptr) {
      return NullArgument("run_v", "counts");
    }
    if (kind != DIST_COLL_ALL_TO_ALL && kind != DIST_COLL_ALL_GATHER &&
        kind != DIST_COLL_REDUCE_SCATTER) {
      return absl::InvalidArgumentError(absl::StrCat(BackendName(),
                                                     ": run_v: ", static_cast<int>(kind),
                                                     " is not a variable-count collective"));
    }
    return comm->impl->RunVariable(kind, *args, *counts,
                                   absl::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
  });
}

inline dist_error_t* WorkWait(dist_backend_work_t* work, int64_t timeout_ms) {
  return Guard(BackendName(), "work_wait", [&]() -> absl::Status {
    if (work == nullptr) return NullArgument("work_wait", "work");
    // The core always passes a bound; a negative one is treated as 0.
    return Impl(work).Wait(absl::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms));
  });
}

inline dist_error_t* WorkTest(dist_backend_work_t* work, int* done) {
  return Guard(BackendName(), "work_test", [&]() -> absl::Status {
    if (work == nullptr) return NullArgument("work_test", "work");
    if (done == nullptr) return NullArgument("work_test", "done");
    bool finished = false;
    absl::Status status = Impl(work).Test(&finished);
    *done = finished ? 1 : 0;
    return finished ? status : absl::OkStatus();
  });
}

inline void WorkDestroy(dist_backend_work_t* work) {
  GuardVoid(BackendName(), "work_destroy", [&] { delete work; });
}

inline dist_error_t* WorkWaitStream(dist_backend_work_t* work, void* stream) {
  return Guard(BackendName(), "work_wait_stream", [&]() -> absl::Status {
    if (work == nullptr) return NullArgument("work_wait_stream", "work");
    return Impl(work).WaitStream(stream);
  });
}

}  // namespace internal

// The table for `backend` (which must live for the process), filled field by
// field over a zeroed table so that fields appended later stay NULL.
inline dist_backend_plugin_t MakeBackendTable(Backend& backend) {
  internal::TheBackend() = &backend;
  dist_backend_plugin_t t{};
  t.struct_size = sizeof(t);
  t.abi_major = DIST_BACKEND_ABI_MAJOR;
  t.abi_minor = DIST_BACKEND_ABI_MINOR;
  t.name = backend.name();
  t.version = backend.version();
  t.initialize = &internal::Initialize;
  t.library_version = &internal::LibraryVersion;
  t.probe = &internal::Probe;
  t.get_capabilities = &internal::GetCapabilities;
  t.comm_create = &internal::CommCreate;
  t.comm_split = backend.has_split() ? &internal::CommSplit : nullptr;
  t.comm_abort = &internal::CommAbort;
  t.comm_destroy = &internal::CommDestroy;
  t.all_reduce = &internal::Issue<DIST_COLL_ALL_REDUCE>;
  t.broadcast = &internal::Issue<DIST_COLL_BROADCAST>;
  t.reduce = &internal::Issue<DIST_COLL_REDUCE>;
  t.all_gather = &internal::Issue<DIST_COLL_ALL_GATHER>;
  t.gather = &internal::Issue<DIST_COLL_GATHER>;
  t.scatter = &internal::Issue<DIST_COLL_SCATTER>;
  t.reduce_scatter = &internal::Issue<DIST_COLL_REDUCE_SCATTER>;
  t.all_to_all = &internal::Issue<DIST_COLL_ALL_TO_ALL>;
  t.barrier = &internal::Issue<DIST_COLL_BARRIER>;
  t.send = &internal::Issue<DIST_COLL_SEND>;
  t.recv = &internal::Issue<DIST_COLL_RECV>;
  t.work_wait = &internal::WorkWait;
  t.work_test = &internal::WorkTest;
  t.work_destroy = &internal::WorkDestroy;
  t.work_wait_stream = backend.has_wait_stream() ? &internal::WorkWaitStream : nullptr;
  t.run = &internal::Run;
  t.run_sendrecv = &internal::RunSendRecv;
  t.run_v = backend.has_variable_counts() ? &internal::RunV : nullptr;
  return t;
}

}  // namespace dist

// Defines the entry symbol dist_backend_plugin_v1, returning the table of a
// process-lived `BackendClass` (default-constructible, derived from
// dist::Backend). Use once per plugin, at file scope.
#define DIST_EXPORT_BACKEND_PLUGIN(BackendClass)                                     \
  extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) { \
    static BackendClass* const backend = new BackendClass();                         \
    static const dist_backend_plugin_t table = ::dist::MakeBackendTable(*backend);   \
    return &table;                                                                   \
  }

#endif  // DIST_CPP_BACKEND_ADAPTER_HPP_

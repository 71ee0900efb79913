// The NCCL functions that the nccl plugin and its benchmark call, emulated
// on the CPU: each operation is a task on the caller's (emulated) stream
// that meets the other ranks in their Clique. Non-blocking communicators
// answer ncclInProgress where NCCL may (init, split, finalize, the first
// operation, a group) so the plugin's polling paths run too.
#include <nccl.h>

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/nccl/emulation/clique.h"
#include "tests/nccl/emulation/device_runtime.h"
#include "tests/nccl/emulation/reduction.h"
#include "tests/nccl/emulation/stream_handle.h"

namespace dist::emulation {
namespace {

// What ncclCommGetAsyncError and ncclGetLastError report; shared with the
// tasks, which may finish after the communicator is destroyed.
struct CommState {
  std::mutex mu;
  std::condition_variable cv;
  ncclResult_t async = ncclSuccess;
  std::string last_error;
  int outstanding = 0;  // tasks enqueued and not finished

  void Fail(const Outcome& outcome) {
    std::lock_guard<std::mutex> lock(mu);
    if (async == ncclSuccess || async == ncclInProgress) async = outcome.result;
    if (last_error.empty()) last_error = outcome.message;
  }
  void Set(ncclResult_t result) {
    std::lock_guard<std::mutex> lock(mu);
    if (async == ncclSuccess || async == ncclInProgress) async = result;
  }
  ncclResult_t Get() {
    std::lock_guard<std::mutex> lock(mu);
    return async;
  }
};

}  // namespace
}  // namespace dist::emulation

using dist::emulation::Clique;
using dist::emulation::Collective;
using dist::emulation::CollectiveKind;
using dist::emulation::CommState;
using dist::emulation::Outcome;
using dist::emulation::PointToPoint;

// Never freed: tasks, split threads and finalize threads may outlive the
// handle, and a few bytes per communicator do not matter in a test. Made by
// Immortal below, so the handles stay reachable and LeakSanitizer (tests
// under --config=asan) does not count them as leaks.
struct ncclComm {
  std::shared_ptr<CommState> state = std::make_shared<CommState>();
  std::shared_ptr<Clique> clique;  // set once the split that makes it ends
  int rank = 0;
  int nranks = 0;
  int device = 0;
  bool blocking = true;
  bool destroyed = false;
  bool connected = false;  // the first operation "connects" (ncclInProgress)
  uint64_t next_collective = 0;
  uint64_t next_split = 0;
  std::vector<uint64_t> next_send;
  std::vector<uint64_t> next_recv;
};

namespace dist::emulation {

// Keeps `object` reachable from a global for the rest of the process: for
// what is never freed on purpose (communicator handles, each thread's group
// calls), so that LeakSanitizer does not report it.
template <typename T>
T* Immortal(T* object) {
  static std::mutex mu;
  static auto* kept = new std::vector<const void*>();
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(object);
  return object;
}

}  // namespace dist::emulation

namespace dist::emulation {
namespace {

thread_local std::string last_error_without_comm;

ncclResult_t Refuse(ncclComm_t comm, ncclResult_t result, const std::string& message) {
  if (comm != nullptr) {
    std::lock_guard<std::mutex> lock(comm->state->mu);
    comm->state->last_error = message;
  } else {
    last_error_without_comm = message;
  }
  return result;
}

bool Blocking(const ncclConfig_t* config, bool fallback) {
  if (config == nullptr || config->blocking == NCCL_CONFIG_UNDEF_INT) return fallback;
  return config->blocking != 0;
}

// Checks every call on a communicator makes first.
ncclResult_t Usable(ncclComm_t comm) {
  if (comm == nullptr) return Refuse(nullptr, ncclInvalidArgument, "emulated NCCL: comm is NULL");
  if (comm->destroyed) return Refuse(comm, ncclInvalidUsage, "emulated NCCL: comm was destroyed");
  const ncclResult_t state = comm->state->Get();
  if (state == ncclInProgress) {
    return Refuse(comm, ncclInvalidUsage,
                  "emulated NCCL: comm used before its non-blocking init or split finished");
  }
  return state;  // a sticky asynchronous error, or success
}

ncclResult_t CheckBuffer(ncclComm_t comm, const void* buffer, size_t bytes, const char* name) {
  if (bytes == 0) return ncclSuccess;
  const int device = DeviceOf(buffer, bytes);
  if (device == comm->device) return ncclSuccess;
  return Refuse(
      comm, ncclInvalidArgument,
      absl::StrCat("emulated NCCL: ", name, " ", reinterpret_cast<uintptr_t>(buffer), " (", bytes,
                   " bytes) is not memory of cuda:", comm->device,
                   device < 0 ? " (host memory?)" : absl::StrCat(" but of cuda:", device)));
}

ncclResult_t StreamOnDevice(ncclComm_t comm, cudaStream_t stream,
                            std::shared_ptr<Stream>* resolved) {
  *resolved = ResolveStream(stream);
  if ((*resolved)->device() == comm->device) return ncclSuccess;
  return Refuse(comm, ncclInvalidArgument,
                absl::StrCat("emulated NCCL: the stream belongs to cuda:", (*resolved)->device(),
                             " but the communicator to cuda:", comm->device));
}

// Runs `work` on `stream` after its earlier work; failures become the
// communicator's asynchronous error.
void Submit(ncclComm_t comm, const std::shared_ptr<Stream>& stream, std::function<Outcome()> work) {
  std::shared_ptr<CommState> state = comm->state;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    ++state->outstanding;
  }
  EnqueueOrdered(stream, [state, work = std::move(work)] {
    const Outcome outcome = work();
    if (outcome.result != ncclSuccess) state->Fail(outcome);
    std::lock_guard<std::mutex> lock(state->mu);
    --state->outstanding;
    state->cv.notify_all();
  });
}

// What an enqueuing call returns: a non-blocking communicator says
// ncclInProgress on its first operation (NCCL connects lazily) and for
// groups; the state is already settled when the caller polls.
ncclResult_t Enqueued(ncclComm_t comm, bool in_progress) {
  if (comm->blocking) return ncclSuccess;
  if (!comm->connected) {
    comm->connected = true;
    in_progress = true;
  }
  return in_progress ? ncclInProgress : ncclSuccess;
}

// ---- Groups: send/recv calls between ncclGroupStart and ncclGroupEnd -------

struct GroupedCall {
  ncclComm_t comm;
  std::shared_ptr<Stream> stream;
  PointToPoint op;
};

thread_local int group_depth = 0;
thread_local std::vector<GroupedCall>* group_calls = nullptr;

std::vector<GroupedCall>& GroupCalls() {
  if (group_calls == nullptr) group_calls = Immortal(new std::vector<GroupedCall>());
  return *group_calls;
}

void SubmitPointToPoint(ncclComm_t comm, const std::shared_ptr<Stream>& stream,
                        std::vector<PointToPoint> ops) {
  std::shared_ptr<Clique> clique = comm->clique;
  const int rank = comm->rank;
  Submit(comm, stream,
         [clique, rank, ops = std::move(ops)] { return clique->RunPointToPoint(rank, ops); });
}

ncclResult_t PointToPointCall(bool is_send, void* buffer, size_t count, ncclDataType_t type,
                              int peer, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t usable = Usable(comm);
  if (usable != ncclSuccess) return usable;
  const size_t size = ElementSize(type);
  if (size == 0) return Refuse(comm, ncclInvalidArgument, "emulated NCCL: unknown data type");
  if (peer < 0 || peer >= comm->nranks) {
    return Refuse(
        comm, ncclInvalidArgument,
        absl::StrCat("emulated NCCL: peer ", peer, " is outside ", comm->nranks, " ranks"));
  }
  ncclResult_t checked = CheckBuffer(comm, buffer, count * size, is_send ? "sendbuff" : "recvbuff");
  if (checked != ncclSuccess) return checked;
  std::shared_ptr<Stream> resolved;
  checked = StreamOnDevice(comm, stream, &resolved);
  if (checked != ncclSuccess) return checked;
  std::vector<uint64_t>& counter = is_send ? comm->next_send : comm->next_recv;
  PointToPoint op{is_send, peer, buffer, count * size, counter[static_cast<size_t>(peer)]++};
  if (group_depth > 0) {
    GroupCalls().push_back({comm, resolved, op});
    return ncclSuccess;
  }
  SubmitPointToPoint(comm, resolved, {op});
  return Enqueued(comm, false);
}

ncclResult_t CollectiveCall(Collective c, size_t send_bytes, size_t recv_bytes, ncclComm_t comm,
                            cudaStream_t stream) {
  ncclResult_t usable = Usable(comm);
  if (usable != ncclSuccess) return usable;
  if (ElementSize(c.type) == 0) {
    return Refuse(comm, ncclInvalidArgument, "emulated NCCL: unknown data type");
  }
  if (!KnownReduction(c.op)) {
    return Refuse(comm, ncclInvalidArgument, "emulated NCCL: unknown reduction");
  }
  const bool rooted = c.kind == CollectiveKind::kBroadcast || c.kind == CollectiveKind::kReduce;
  if (rooted && (c.root < 0 || c.root >= comm->nranks)) {
    return Refuse(
        comm, ncclInvalidArgument,
        absl::StrCat("emulated NCCL: root ", c.root, " is outside ", comm->nranks, " ranks"));
  }
  // Off the root, broadcast ignores sendbuff and reduce ignores recvbuff.
  const bool reads_send = !(c.kind == CollectiveKind::kBroadcast && comm->rank != c.root);
  const bool writes_recv = !(c.kind == CollectiveKind::kReduce && comm->rank != c.root);
  ncclResult_t checked =
      reads_send ? CheckBuffer(comm, c.send, send_bytes, "sendbuff") : ncclSuccess;
  if (checked == ncclSuccess && writes_recv)
    checked = CheckBuffer(comm, c.recv, recv_bytes, "recvbuff");
  if (checked != ncclSuccess) return checked;
  std::shared_ptr<Stream> resolved;
  checked = StreamOnDevice(comm, stream, &resolved);
  if (checked != ncclSuccess) return checked;
  if (!writes_recv) c.recv = nullptr;
  std::shared_ptr<Clique> clique = comm->clique;
  const int rank = comm->rank;
  const uint64_t seq = comm->next_collective++;
  Submit(comm, resolved, [clique, rank, seq, c] { return clique->RunCollective(seq, rank, c); });
  return Enqueued(comm, group_depth > 0);
}

ncclResult_t InitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                      bool blocking) {
  if (out == nullptr) return Refuse(nullptr, ncclInvalidArgument, "emulated NCCL: comm is NULL");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return Refuse(nullptr, ncclInvalidArgument,
                  absl::StrCat("emulated NCCL: rank ", rank, " of ", nranks, " ranks"));
  }
  std::string error;
  std::shared_ptr<Clique> clique = CliqueFor(id, nranks, &error);
  if (clique == nullptr) return Refuse(nullptr, ncclInvalidUsage, error);
  const Outcome joined = clique->Join(rank);
  if (joined.result != ncclSuccess) return Refuse(nullptr, joined.result, joined.message);
  auto* comm = dist::emulation::Immortal(new ncclComm());
  comm->clique = clique;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->device = CurrentDevice();
  comm->blocking = blocking;
  comm->next_send.assign(static_cast<size_t>(nranks), 0);
  comm->next_recv.assign(static_cast<size_t>(nranks), 0);
  *out = comm;
  if (blocking) {
    clique->AwaitMembers(rank);
    return ncclSuccess;
  }
  comm->state->async = ncclInProgress;
  std::shared_ptr<CommState> state = comm->state;
  std::thread([clique, rank, state] {
    clique->AwaitMembers(rank);
    state->Set(ncclSuccess);
  }).detach();
  return ncclInProgress;
}

const char* ErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

}  // namespace
}  // namespace dist::emulation

using dist::emulation::CollectiveCall;
using dist::emulation::PointToPointCall;
using dist::emulation::Refuse;
using dist::emulation::Usable;

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::memset(id->internal, 0, sizeof(id->internal));
  const uint64_t words[2] = {random(), counter.fetch_add(1)};
  std::memcpy(id->internal, words, sizeof(words));
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) { return dist::emulation::ErrorString(result); }

const char* ncclGetLastError(ncclComm_t comm) {
  thread_local std::string copy;
  if (comm == nullptr) {
    copy = dist::emulation::last_error_without_comm;
  } else {
    std::lock_guard<std::mutex> lock(comm->state->mu);
    copy = comm->state->last_error;
  }
  return copy.c_str();
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  return dist::emulation::InitRank(comm, nranks, id, rank, dist::emulation::Blocking(config, true));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return dist::emulation::InitRank(comm, nranks, id, rank, true);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) return ncclInvalidArgument;
  *async_error = comm->state->Get();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  if (comm == nullptr || device == nullptr) return ncclInvalidArgument;
  *device = comm->device;
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  std::shared_ptr<dist::emulation::CommState> state = comm->state;
  auto flush = [state] {
    std::unique_lock<std::mutex> lock(state->mu);
    state->cv.wait(lock, [&] { return state->outstanding == 0; });
  };
  if (comm->blocking) {
    flush();
    return state->Get();
  }
  state->Set(ncclInProgress);
  std::thread([state, flush] {
    flush();
    std::lock_guard<std::mutex> lock(state->mu);
    if (state->async == ncclInProgress) state->async = ncclSuccess;
  }).detach();
  return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->destroyed = true;  // the handle itself is never freed (see ncclComm)
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->destroyed = true;
  // Its waiting work quits; peers waiting for it get ncclRemoteError.
  if (comm->clique != nullptr) comm->clique->Leave(comm->rank);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  ncclResult_t usable = Usable(comm);
  if (usable != ncclSuccess) return usable;
  if (newcomm == nullptr)
    return Refuse(comm, ncclInvalidArgument, "emulated NCCL: newcomm is NULL");
  ncclComm* child = nullptr;
  if (color != NCCL_SPLIT_NOCOLOR) {
    child = dist::emulation::Immortal(new ncclComm());
    child->device = comm->device;
    child->blocking = dist::emulation::Blocking(config, comm->blocking);
    child->state->async = ncclInProgress;
  }
  *newcomm = child;
  std::shared_ptr<Clique> clique = comm->clique;
  std::shared_ptr<dist::emulation::CommState> parent = comm->state;
  const int rank = comm->rank;
  const uint64_t seq = comm->next_split++;
  auto work = [clique, parent, child, rank, seq, color, key] {
    dist::emulation::SplitResult result;
    const Outcome outcome = clique->Split(seq, rank, color, key, &result);
    if (outcome.result != ncclSuccess) {
      parent->Fail(outcome);
      if (child != nullptr) child->state->Fail(outcome);
      return outcome.result;
    }
    if (child != nullptr) {
      std::string error;
      std::shared_ptr<Clique> clique =
          dist::emulation::CliqueFor(result.child, result.nranks, &error);
      const Outcome joined =
          clique != nullptr ? clique->Join(result.rank) : Outcome{ncclSystemError, error};
      if (joined.result != ncclSuccess) {
        parent->Fail(joined);
        child->state->Fail(joined);
        return joined.result;
      }
      std::lock_guard<std::mutex> lock(child->state->mu);
      child->clique = clique;
      child->rank = result.rank;
      child->nranks = result.nranks;
      child->next_send.assign(static_cast<size_t>(result.nranks), 0);
      child->next_recv.assign(static_cast<size_t>(result.nranks), 0);
      if (child->state->async == ncclInProgress) child->state->async = ncclSuccess;
    }
    std::lock_guard<std::mutex> lock(parent->mu);
    if (parent->async == ncclInProgress) parent->async = ncclSuccess;
    return ncclSuccess;
  };
  const bool blocking =
      child != nullptr ? child->blocking : dist::emulation::Blocking(config, comm->blocking);
  if (blocking) return work();
  parent->Set(ncclInProgress);
  std::thread(work).detach();
  return ncclInProgress;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * dist::emulation::ElementSize(datatype);
  return CollectiveCall({CollectiveKind::kAllReduce, datatype, op, count, 0, sendbuff, recvbuff},
                        bytes, bytes, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = count * dist::emulation::ElementSize(datatype);
  return CollectiveCall(
      {CollectiveKind::kBroadcast, datatype, ncclSum, count, root, sendbuff, recvbuff}, bytes,
      bytes, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = count * dist::emulation::ElementSize(datatype);
  return CollectiveCall({CollectiveKind::kReduce, datatype, op, count, root, sendbuff, recvbuff},
                        bytes, bytes, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const size_t bytes = sendcount * dist::emulation::ElementSize(datatype);
  const size_t ranks = comm != nullptr ? static_cast<size_t>(comm->nranks) : 0;
  return CollectiveCall(
      {CollectiveKind::kAllGather, datatype, ncclSum, sendcount, 0, sendbuff, recvbuff}, bytes,
      bytes * ranks, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  const size_t bytes = recvcount * dist::emulation::ElementSize(datatype);
  const size_t ranks = comm != nullptr ? static_cast<size_t>(comm->nranks) : 0;
  return CollectiveCall(
      {CollectiveKind::kReduceScatter, datatype, op, recvcount, 0, sendbuff, recvbuff},
      bytes * ranks, bytes, comm, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return PointToPointCall(true, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return PointToPointCall(false, recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart(void) {
  ++dist::emulation::group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  using dist::emulation::GroupCalls;
  using dist::emulation::GroupedCall;
  if (dist::emulation::group_depth == 0) {
    return Refuse(nullptr, ncclInvalidUsage, "emulated NCCL: ncclGroupEnd without ncclGroupStart");
  }
  if (--dist::emulation::group_depth > 0) return ncclSuccess;
  std::vector<GroupedCall> calls;
  calls.swap(GroupCalls());
  // One task per communicator and stream, holding all its sends and recvs,
  // so that they progress together as in NCCL.
  bool any_non_blocking = false;
  std::vector<bool> taken(calls.size(), false);
  for (size_t i = 0; i < calls.size(); ++i) {
    if (taken[i]) continue;
    std::vector<PointToPoint> ops;
    for (size_t j = i; j < calls.size(); ++j) {
      if (!taken[j] && calls[j].comm == calls[i].comm && calls[j].stream == calls[i].stream) {
        ops.push_back(calls[j].op);
        taken[j] = true;
      }
    }
    dist::emulation::SubmitPointToPoint(calls[i].comm, calls[i].stream, std::move(ops));
    if (!calls[i].comm->blocking) any_non_blocking = true;
  }
  return any_non_blocking ? ncclInProgress : ncclSuccess;
}

}  // extern "C"

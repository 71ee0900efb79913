#include "plugins/backends/nccl/communicator.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dist/cpp/failure_notes.hpp"
#include "dist/cpp/host_log.hpp"
#include "dist/cpp/store.hpp"
#include "dist/cpp/validate.hpp"
#include "dist/types.h"
#include "plugins/backends/nccl/comm_config.h"
#include "plugins/backends/nccl/cuda_status.h"
#include "plugins/backends/nccl/device_guard.h"
#include "plugins/backends/nccl/nccl_poll.h"
#include "plugins/backends/nccl/nccl_types.h"
#include "plugins/backends/nccl/op_validation.h"

namespace dist_nccl {
namespace {

absl::Duration OpTimeout(const dist_op_args_t& args, const CommSettings& settings) {
  return args.timeout_ms > 0 ? absl::Milliseconds(args.timeout_ms) : settings.timeout;
}

// The watchdog ticks often enough to honour short timeouts, rarely enough to
// cost nothing (each tick is one ncclCommGetAsyncError and an event query
// per pending operation).
absl::Duration WatchdogInterval(absl::Duration timeout) {
  return std::clamp(timeout / 20, absl::Milliseconds(5), absl::Milliseconds(100));
}

const char* Bytes(const void* base, uint64_t elements, size_t element_size) {
  return static_cast<const char*>(base) + elements * element_size;
}

char* Bytes(void* base, uint64_t elements, size_t element_size) {
  return static_cast<char*>(base) + elements * element_size;
}

// ncclGroupStart ... ncclGroupEnd around point-to-point calls (and
// reductions), keeping the first failure: a call that fails inside the group
// must still close it, or the thread's next NCCL call joins the open group.
class NcclGroup {
 public:
  NcclGroup() : first_(ncclGroupStart()), open_(first_ == ncclSuccess) {}
  ~NcclGroup() {
    if (open_) ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // False when ncclGroupStart failed: End() then returns its error.
  bool started() const { return open_; }
  // ncclInProgress is no failure: a non-blocking communicator may answer so.
  void Add(ncclResult_t result) {
    if (first_ == ncclSuccess && result != ncclSuccess && result != ncclInProgress) {
      first_ = result;
    }
  }
  // Closes the group. ncclInProgress is the normal answer of a
  // non-blocking communicator, polled by the caller.
  ncclResult_t End() {
    if (!open_) return first_;
    open_ = false;
    const ncclResult_t end = ncclGroupEnd();
    return first_ != ncclSuccess ? first_ : end;
  }

 private:
  ncclResult_t first_;
  bool open_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Communicator>> Communicator::Adopt(ncclComm_t comm,
                                                                  CommSettings settings) {
  cudaStream_t stream = nullptr;
  float* scratch = nullptr;
  cudaEvent_t order_event = nullptr;
  const std::string where = absl::StrCat("nccl init on rank ", settings.rank, " of group '",
                                         settings.group, "' (cuda:", settings.device, ")");
  const DeviceGuard device_guard(settings.device);
  absl::Status status = CudaStatus(device_guard.result(), where);
  if (status.ok()) {
    // Non-blocking: the own stream must not serialize with the legacy
    // default stream implicitly (ordering is explicit, see Start).
    status = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                        absl::StrCat(where, ": cudaStreamCreateWithFlags"));
  }
  if (status.ok()) {
    status = CudaStatus(cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(float)),
                        absl::StrCat(where, ": cudaMalloc"));
  }
  if (status.ok()) {
    status = CudaStatus(cudaMemset(scratch, 0, sizeof(float)), absl::StrCat(where, ": cudaMemset"));
  }
  if (status.ok()) {
    status = CudaStatus(cudaEventCreateWithFlags(&order_event, cudaEventDisableTiming),
                        absl::StrCat(where, ": cudaEventCreateWithFlags"));
  }
  if (!status.ok()) {
    if (order_event != nullptr) cudaEventDestroy(order_event);
    if (scratch != nullptr) cudaFree(scratch);
    if (stream != nullptr) cudaStreamDestroy(stream);
    ncclCommAbort(comm);
    return status;
  }
  std::shared_ptr<Communicator> result(
      new Communicator(comm, std::move(settings), stream, scratch, order_event));
  Communicator* raw = result.get();
  result->watchdog_ =
      std::make_unique<Watchdog>([raw] { raw->Check(); }, WatchdogInterval(raw->settings_.timeout));
  return result;
}

Communicator::Communicator(ncclComm_t comm, CommSettings settings, cudaStream_t stream,
                           float* scratch, cudaEvent_t order_event)
    : settings_(std::move(settings)),
      stream_(stream),
      scratch_(scratch),
      order_event_(order_event),
      comm_(comm) {}

Communicator::~Communicator() { Shutdown(); }

std::string Communicator::Where() const {
  return absl::StrCat("rank ", settings_.rank, " of group '", settings_.group,
                      "' (cuda:", settings_.device, ")");
}

absl::Status Communicator::AbortStatus() {
  absl::MutexLock lock(&state_mu_);
  if (abort_status_.has_value()) return *abort_status_;
  return absl::AbortedError(
      absl::StrCat("nccl communicator on ", Where(), " was aborted; create a new process group"));
}

absl::Status Communicator::OrderAfterDefaultStream() {
  absl::Status status = CudaStatus(cudaEventRecord(order_event_, cudaStreamLegacy),
                                   "nccl: cudaEventRecord on the default stream");
  if (!status.ok()) return status;
  return CudaStatus(cudaStreamWaitEvent(stream_, order_event_, 0),
                    "nccl: cudaStreamWaitEvent on the communicator stream");
}

ncclResult_t Communicator::Launch(const Launchable& op, cudaStream_t stream) {
  const int rank = settings_.rank;
  const int world = settings_.world_size;
  const dist_op_args_t& args = op.args;
  const ncclDataType_t dtype = op.dtype;
  const size_t elem = op.elem;
  const ncclRedOp_t redop = op.redop;
  const void* send = args.send.data;
  void* recv = args.recv.data;
  switch (op.kind) {
    case DIST_COLL_ALL_REDUCE:
      return ncclAllReduce(send, recv, args.send.count, dtype, redop, comm_, stream);
    case DIST_COLL_BROADCAST:
      // sendbuff is read on the root only.
      return ncclBroadcast(args.root == rank ? send : recv, recv, args.recv.count, dtype, args.root,
                           comm_, stream);
    case DIST_COLL_REDUCE:
      // recvbuff is written on the root only; off root it may be NULL.
      return ncclReduce(send, recv != nullptr ? recv : args.send.data, args.send.count, dtype,
                        redop, args.root, comm_, stream);
    case DIST_COLL_ALL_GATHER:
      return ncclAllGather(send, recv, args.send.count, dtype, comm_, stream);
    case DIST_COLL_REDUCE_SCATTER:
      return ncclReduceScatter(send, recv, args.recv.count, dtype, redop, comm_, stream);
    case DIST_COLL_BARRIER:
      return ncclAllReduce(scratch_, scratch_, 1, ncclFloat32, ncclSum, comm_, stream);
    case DIST_COLL_SEND:
      return ncclSend(send, args.send.count, dtype, args.peer, comm_, stream);
    case DIST_COLL_RECV:
      return ncclRecv(recv, args.recv.count, dtype, args.peer, comm_, stream);
    default:
      break;
  }
  // gather, scatter and all-to-all: point-to-point calls fused by a group,
  // so NCCL schedules them together.
  NcclGroup group;
  if (!group.started()) return group.End();
  if (op.kind == DIST_COLL_GATHER) {
    const uint64_t n = args.send.count;
    if (args.root == rank) {
      for (int peer = 0; peer < world; ++peer) {
        group.Add(ncclRecv(Bytes(recv, n * peer, elem), n, dtype, peer, comm_, stream));
      }
    }
    group.Add(ncclSend(send, n, dtype, args.root, comm_, stream));
  } else if (op.kind == DIST_COLL_SCATTER) {
    const uint64_t n = args.recv.count;
    if (args.root == rank) {
      for (int peer = 0; peer < world; ++peer) {
        group.Add(ncclSend(Bytes(send, n * peer, elem), n, dtype, peer, comm_, stream));
      }
    }
    group.Add(ncclRecv(recv, n, dtype, args.root, comm_, stream));
  } else {  // all-to-all
    const uint64_t n = args.send.count / static_cast<uint64_t>(world);
    for (int peer = 0; peer < world; ++peer) {
      group.Add(ncclSend(Bytes(send, n * peer, elem), n, dtype, peer, comm_, stream));
      group.Add(ncclRecv(Bytes(recv, n * peer, elem), n, dtype, peer, comm_, stream));
    }
  }
  return group.End();
}

ncclResult_t Communicator::LaunchVariable(const Launchable& op, cudaStream_t stream) {
  const VariableBlocks& blocks = *op.blocks;
  const dist_op_args_t& args = op.args;
  const int rank = settings_.rank;
  const int world = settings_.world_size;
  const ncclDataType_t dtype = op.dtype;
  const size_t elem = op.elem;
  const void* send = args.send.data;
  void* recv = args.recv.data;
  // Equal blocks: NCCL's own reduce-scatter (ring or tree) beats a group of
  // reductions. (all_gather_v has no such shortcut: recv displacements are
  // each rank's own, so no rank could tell that all took the same path.)
  if (blocks.uniform) {
    return ncclReduceScatter(send, recv, blocks.recv_counts[0], dtype, op.redop, comm_, stream);
  }
  // Otherwise one group, so that NCCL runs its calls together (each call
  // alone would wait for its peer's matching one). Empty blocks are left
  // out on both sides: the counts agree between ranks, so a send that is
  // skipped has no recv waiting for it. A rank's block for itself is a
  // send/recv to itself, as in all-to-all, which NCCL copies locally.
  NcclGroup group;
  if (!group.started()) return group.End();
  if (op.kind == DIST_COLL_ALL_TO_ALL) {
    for (int peer = 0; peer < world; ++peer) {
      const size_t p = static_cast<size_t>(peer);
      if (blocks.send_counts[p] > 0) {
        group.Add(ncclSend(Bytes(send, blocks.send_displs[p], elem), blocks.send_counts[p], dtype,
                           peer, comm_, stream));
      }
      if (blocks.recv_counts[p] > 0) {
        group.Add(ncclRecv(Bytes(recv, blocks.recv_displs[p], elem), blocks.recv_counts[p], dtype,
                           peer, comm_, stream));
      }
    }
  } else if (op.kind == DIST_COLL_ALL_GATHER) {
    // In place (send is recv's own block) there is nothing to copy locally.
    const uint64_t own = blocks.recv_counts[static_cast<size_t>(rank)];
    const bool in_place =
        Bytes(recv, blocks.recv_displs[static_cast<size_t>(rank)], elem) == args.send.data;
    for (int peer = 0; peer < world; ++peer) {
      const size_t p = static_cast<size_t>(peer);
      if (peer == rank && in_place) continue;
      if (own > 0) group.Add(ncclSend(send, own, dtype, peer, comm_, stream));
      if (blocks.recv_counts[p] > 0) {
        group.Add(ncclRecv(Bytes(recv, blocks.recv_displs[p], elem), blocks.recv_counts[p], dtype,
                           peer, comm_, stream));
      }
    }
  } else {
    // reduce_scatter_v with uneven blocks: one ncclReduce per block, rooted
    // at the rank that keeps it. NCCL has no reduce-scatter with a count
    // per rank; the chain of a reduce has every rank send each block about
    // once, near what a ring reduce-scatter moves, and costs no all-reduce
    // of the whole buffer. recvbuff is written on the root only, so the
    // other ranks pass the block itself (NCCL ignores it there).
    for (int root = 0; root < world; ++root) {
      const size_t r = static_cast<size_t>(root);
      const uint64_t n = blocks.recv_counts[r];
      if (n == 0) continue;
      const void* block = Bytes(send, blocks.recv_displs[r], elem);
      void* out = root == rank ? recv : const_cast<void*>(block);
      group.Add(ncclReduce(block, out, n, dtype, op.redop, root, comm_, stream));
    }
  }
  return group.End();
}

absl::StatusOr<std::shared_ptr<WorkState>> Communicator::Issue(dist_collective_t op,
                                                               const dist_op_args_t& args) {
  const OpContext context{settings_.rank, settings_.world_size, settings_.device};
  absl::Status valid = ValidateOpArgs(op, args, context);
  if (!valid.ok()) return valid;
  absl::StatusOr<void*> user_stream = ResolveStream(op, args, context);
  if (!user_stream.ok()) return user_stream.status();
  if (aborting_.load(std::memory_order_acquire) || closed_.load()) return AbortStatus();

  // Types only matter for ops that move data; barrier uses float32.
  ncclDataType_t dtype = ncclFloat32;
  size_t elem = sizeof(float);
  ncclRedOp_t redop = ncclSum;
  const dist::UsedBuffers used = dist::BuffersUsed(op, args, context.rank);
  if (used.send || used.recv) {
    const dist_dtype_t dist_dtype = used.send ? args.send.dtype : args.recv.dtype;
    absl::StatusOr<ncclDataType_t> mapped = ToNcclDataType(dist_dtype);
    if (!mapped.ok()) return mapped.status();
    dtype = *mapped;
    elem = dist_dtype_size(dist_dtype);
  }
  if (op == DIST_COLL_ALL_REDUCE || op == DIST_COLL_REDUCE || op == DIST_COLL_REDUCE_SCATTER) {
    absl::StatusOr<ncclRedOp_t> mapped = ToNcclRedOp(args.op);
    if (!mapped.ok()) return mapped.status();
    redop = *mapped;
  }
  return Enqueue(Launchable{op, args, nullptr, dtype, elem, redop}, *user_stream,
                 OpTimeout(args, settings_),
                 absl::StrCat("nccl ", dist_collective_name(op), " on ", Where()));
}

absl::StatusOr<std::shared_ptr<WorkState>> Communicator::IssueVariable(
    dist_collective_t kind, const dist_op_args_t& args, const dist_op_counts_t& counts,
    absl::Duration timeout) {
  const OpContext context{settings_.rank, settings_.world_size, settings_.device};
  absl::StatusOr<VariableBlocks> blocks = CheckVariableArgs(kind, args, counts, context);
  if (!blocks.ok()) return blocks.status();
  absl::StatusOr<void*> user_stream = ResolveVariableStream(kind, args, *blocks);
  if (!user_stream.ok()) return user_stream.status();
  if (aborting_.load(std::memory_order_acquire) || closed_.load()) return AbortStatus();

  // Refusals are INVALID_ARGUMENT: run_v's UNIMPLEMENTED would hand the
  // call back to the core. A rank whose blocks are all empty makes no NCCL
  // call, so its dtype does not matter (and is not checked).
  const bool moves_data = blocks->uses_send || blocks->uses_recv;
  const dist_dtype_t dist_dtype = blocks->uses_send ? args.send.dtype : args.recv.dtype;
  ncclDataType_t dtype = ncclInt8;
  if (moves_data) {
    absl::StatusOr<ncclDataType_t> mapped = ToNcclDataType(dist_dtype);
    if (!mapped.ok()) return absl::InvalidArgumentError(mapped.status().message());
    dtype = *mapped;
  }
  ncclRedOp_t redop = ncclSum;
  if (kind == DIST_COLL_REDUCE_SCATTER) {
    absl::StatusOr<ncclRedOp_t> mapped = ToNcclRedOp(args.op);
    if (!mapped.ok()) return absl::InvalidArgumentError(mapped.status().message());
    redop = *mapped;
  }
  return Enqueue(
      Launchable{kind, args, &*blocks, dtype, moves_data ? dist_dtype_size(dist_dtype) : 1, redop},
      *user_stream, timeout > absl::ZeroDuration() ? timeout : settings_.timeout,
      absl::StrCat("nccl ", VariableName(kind), " on ", Where()));
}

absl::StatusOr<std::shared_ptr<WorkState>> Communicator::Enqueue(const Launchable& op,
                                                                 void* user_stream,
                                                                 absl::Duration timeout,
                                                                 const std::string& what) {
  const absl::Time deadline = absl::Now() + timeout;
  const DeviceGuard device_guard(settings_.device);
  absl::Status status = CudaStatus(device_guard.result(), what);
  if (!status.ok()) return status;

  cudaEvent_t done = nullptr;
  bool nccl_failed = false;
  std::shared_ptr<WorkState> work;
  {
    absl::MutexLock lock(&nccl_mu_);
    if (comm_ == nullptr || aborting_.load(std::memory_order_acquire)) return AbortStatus();
    cudaStream_t stream = static_cast<cudaStream_t>(user_stream);
    if (stream == nullptr) {
      stream = stream_;
      status = OrderAfterDefaultStream();
      if (!status.ok()) return status;
    }
    const ncclResult_t launched =
        op.blocks != nullptr ? LaunchVariable(op, stream) : Launch(op, stream);
    if (launched == ncclInProgress) {
      status = AwaitNccl(comm_, deadline, &aborting_, what);
    } else {
      status = NcclStatus(launched, comm_, what);
    }
    nccl_failed = !status.ok();
    if (status.ok()) {
      status = CudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
                          absl::StrCat(what, ": cudaEventCreateWithFlags"));
    }
    if (status.ok()) {
      status = CudaStatus(cudaEventRecord(done, stream), absl::StrCat(what, ": cudaEventRecord"));
    }
    if (status.ok()) {
      work = std::make_shared<WorkState>(what, done, deadline);
      {
        absl::MutexLock pending_lock(&pending_mu_);
        pending_.push_back(work);
      }
      // An abort that began meanwhile may have collected the pending list
      // before the push; it cannot reach ncclCommAbort while we hold
      // nccl_mu_, so failing the work here comes before NCCL's kernels quit
      // (whose events would otherwise read as success).
      if (aborting_.load(std::memory_order_acquire)) work->Fail(work->Failed(AbortStatus()));
    }
  }
  if (!status.ok()) {
    if (done != nullptr) cudaEventDestroy(done);
    // The other ranks may already be inside this collective: abort so that
    // they fail by their timeout instead of waiting for this rank forever.
    if (nccl_failed && !aborting_.load()) Abort(status);
    return status;
  }
  return work;
}

void Communicator::Abort(const absl::Status& reason, const std::shared_ptr<WorkState>& culprit) {
  {
    absl::MutexLock lock(&state_mu_);
    if (abort_status_.has_value()) return;
  }
  // The culprit gets its own status (e.g. DEADLINE_EXCEEDED) before the
  // abort shows: a health check racing with us would otherwise fail it
  // with the communicator's ABORTED first.
  if (culprit != nullptr) culprit->Fail(reason);
  absl::Status aborted;
  {
    absl::MutexLock lock(&state_mu_);
    if (abort_status_.has_value()) return;  // another abort won the race
    abort_status_ = absl::AbortedError(
        absl::StrCat("nccl communicator on ", Where(), " was aborted: ", reason.message()));
    aborted = *abort_status_;
    aborting_.store(true, std::memory_order_release);
  }
  dist::Log(DIST_LOG_ERROR, std::string(aborted.message()));
  std::vector<std::shared_ptr<WorkState>> pending;
  {
    absl::MutexLock lock(&pending_mu_);
    pending.swap(pending_);
  }
  for (const std::shared_ptr<WorkState>& work : pending) work->Fail(work->Failed(aborted));
  absl::MutexLock lock(&nccl_mu_);
  if (comm_ != nullptr) {
    const DeviceGuard device_guard(settings_.device);
    ncclCommAbort(comm_);  // makes NCCL kernels on the device return
    comm_ = nullptr;
  }
}

std::optional<absl::Status> Communicator::AsyncError() {
  // TryLock: an issuer holding the lock polls the same state itself.
  if (!nccl_mu_.TryLock()) return std::nullopt;
  absl::Status error;
  if (comm_ != nullptr) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(comm_, &state);
    if (query != ncclSuccess) {
      error = NcclStatus(query, comm_, "ncclCommGetAsyncError failed");
    } else if (state != ncclSuccess && state != ncclInProgress) {
      error = NcclStatus(state, comm_, "NCCL reported an asynchronous error");
    }
  }
  nccl_mu_.Unlock();
  return error;
}

std::optional<absl::Status> Communicator::Health() {
  if (aborting_.load(std::memory_order_acquire)) return AbortStatus();
  std::optional<absl::Status> error = AsyncError();
  if (!error.has_value() || error->ok()) return error;
  // Another thread is already telling the group about a failure.
  if (comparing_notes_.exchange(true)) return std::nullopt;
  const std::string notes = CompareNotes(
      absl::StrCat("rank ", settings_.rank, ": ", error->message()), /*name_silent=*/true);
  Abort(absl::Status(error->code(), absl::StrCat(error->message(), notes)));
  return AbortStatus();
}

std::string Communicator::CompareNotes(const std::string& report, bool name_silent) {
  if (settings_.store == nullptr || settings_.world_size < 2) return "";
  dist::FailureNotes notes(dist::StoreView(settings_.store), "nccl/", settings_.rank,
                           settings_.world_size);
  std::string text;
  const std::string first = notes.Publish(report);
  if (!first.empty()) absl::StrAppend(&text, "; first failure in the group: ", first);
  if (!name_silent) return text;
  // Live ranks stuck in the same operation fail at about the same time; a
  // rank that reports nothing within the grace period is the likely cause.
  const absl::Duration grace =
      std::clamp(settings_.timeout / 4, absl::Milliseconds(200), absl::Seconds(2));
  const absl::StatusOr<std::vector<int>> unresponsive = notes.Unresponsive(grace);
  if (!unresponsive.ok()) {
    // The store's host may be the rank that failed.
    absl::StrAppend(&text,
                    "; the ranks could not compare notes (store: ", unresponsive.status().message(),
                    ")");
    return text;
  }
  const std::vector<int>& silent = *unresponsive;
  if (silent.empty()) {
    // Everyone is here and failing: unless one rank's own failure (an
    // abort, a lost peer) explains it, the ranks' calls did not match.
    if (first.empty() || absl::StrContains(first, "timed out")) {
      absl::StrAppend(&text,
                      "; every rank failed here: check that all ranks issue the same "
                      "operations in the same order with the same count, dtype, op and "
                      "root");
    }
  } else {
    absl::StrAppend(&text, "; ", silent.size() == 1 ? "rank " : "ranks ",
                    absl::StrJoin(silent, ", "), " reported no failure within ",
                    absl::FormatDuration(grace), " (dead, stalled, or not calling this operation)");
  }
  return text;
}

void Communicator::AbortByCaller(const std::string& reason) {
  if (!aborting_.load() && !comparing_notes_.exchange(true)) {
    (void)CompareNotes(absl::StrCat("rank ", settings_.rank, ": aborted by the caller: ", reason),
                       /*name_silent=*/false);
  }
  Abort(absl::AbortedError(reason));
}

void Communicator::ReapFinished() {
  std::vector<std::shared_ptr<WorkState>> pending;
  {
    absl::MutexLock lock(&pending_mu_);
    pending = pending_;
  }
  std::vector<WorkState*> finished;
  for (const std::shared_ptr<WorkState>& work : pending) {
    if (Poll(*work).has_value()) finished.push_back(work.get());
  }
  if (finished.empty()) return;
  absl::MutexLock lock(&pending_mu_);
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&](const std::shared_ptr<WorkState>& work) {
                                  return std::find(finished.begin(), finished.end(), work.get()) !=
                                         finished.end();
                                }),
                 pending_.end());
}

void Communicator::Check() {
  if (aborting_.load(std::memory_order_acquire) || closed_.load()) return;
  const std::optional<absl::Status> health = Health();
  if (health.has_value() && !health->ok()) return;  // aborted
  ReapFinished();
  const absl::Time now = absl::Now();
  std::shared_ptr<WorkState> late;
  {
    absl::MutexLock lock(&pending_mu_);
    for (const std::shared_ptr<WorkState>& work : pending_) {
      if (now > work->deadline()) {
        late = work;
        break;
      }
    }
  }
  if (late == nullptr) return;
  if (comparing_notes_.exchange(true)) return;  // another thread is reporting
  std::string notes =
      CompareNotes(absl::StrCat("rank ", settings_.rank, ": ", late->what(), " timed out"),
                   /*name_silent=*/true);
  if (notes.empty()) notes = "; a peer rank probably died, stalled or issued different operations";
  Abort(absl::DeadlineExceededError(absl::StrCat(late->what(), " did not complete by its timeout",
                                                 notes,
                                                 "; the communicator was aborted so that no rank "
                                                 "hangs")),
        late);
}

void Communicator::Shutdown() {
  if (closed_.exchange(true)) return;
  const absl::Time deadline = absl::Now() + settings_.timeout;
  // Wait for outstanding work; the watchdog keeps watching meanwhile.
  Backoff backoff(absl::Milliseconds(5));
  while (!aborting_.load()) {
    ReapFinished();
    {
      absl::MutexLock lock(&pending_mu_);
      if (pending_.empty()) break;
    }
    if (absl::Now() >= deadline) {
      Abort(absl::DeadlineExceededError(
          absl::StrCat("nccl comm_destroy on ", Where(),
                       ": outstanding work did not finish within the timeout")));
      break;
    }
    backoff.Pause();
  }
  watchdog_.reset();  // joins the thread: no more ticks from here on
  const DeviceGuard device_guard(settings_.device);
  {
    absl::MutexLock lock(&nccl_mu_);
    if (comm_ != nullptr) {
      // Finalize flushes NCCL's own work; polled so a dead peer cannot hang
      // destroy. Only a finalized communicator may be destroyed cleanly.
      ncclResult_t result = ncclCommFinalize(comm_);
      absl::Status status = result == ncclInProgress
                                ? AwaitNccl(comm_, deadline, nullptr, "ncclCommFinalize")
                                : NcclStatus(result, comm_, "ncclCommFinalize");
      if (status.ok()) {
        ncclCommDestroy(comm_);
      } else {
        dist::Log(DIST_LOG_WARN, absl::StrCat("nccl on ", Where(), ": ", status.message(),
                                              "; aborting the communicator instead"));
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
  }
  // Destroying a stream or event with work still queued is safe in CUDA:
  // the resources go once the work is done.
  cudaEventDestroy(order_event_);
  cudaFree(scratch_);
  cudaStreamDestroy(stream_);
}

absl::StatusOr<std::shared_ptr<Communicator>> Communicator::Split(
    const dist_comm_config_t& config) {
  const bool member = config.rank >= 0;
  const std::string group = config.group_name != nullptr ? config.group_name : "subgroup";
  const std::string what = absl::StrCat("nccl comm_split into group '", group, "' on ", Where());
  if (aborting_.load() || closed_.load()) return AbortStatus();
  const DeviceGuard device_guard(settings_.device);
  absl::Status status = CudaStatus(device_guard.result(), what);
  if (!status.ok()) return status;
  const absl::Duration timeout =
      config.timeout_ms > 0 ? absl::Milliseconds(config.timeout_ms) : settings_.timeout;
  const absl::Time deadline = absl::Now() + timeout;

  // Non-blocking: polled, so that a missing rank cannot hang us.
  ncclConfig_t nccl_config = NonBlockingConfig(group);
  ncclComm_t child = nullptr;
  {
    absl::MutexLock lock(&nccl_mu_);
    if (comm_ == nullptr) return AbortStatus();
    // Members share color 0 and are ordered by their new rank; the others
    // pass NCCL_SPLIT_NOCOLOR and get no communicator.
    const ncclResult_t result =
        ncclCommSplit(comm_, member ? 0 : NCCL_SPLIT_NOCOLOR, member ? config.rank : settings_.rank,
                      &child, &nccl_config);
    if (result != ncclSuccess && result != ncclInProgress) {
      status = NcclStatus(result, comm_, what);
    } else {
      status = AwaitNccl(comm_, deadline, &aborting_, what);
      if (status.ok() && child != nullptr) {
        status = AwaitNccl(child, deadline, &aborting_, what);
      }
    }
  }
  if (!status.ok()) {
    if (child != nullptr) ncclCommAbort(child);
    // Peers may be stuck in the split: abort the parent too (no hang).
    Abort(status);
    return status;
  }
  if (!member) {
    if (child != nullptr) ncclCommDestroy(child);  // not expected with NOCOLOR
    return std::shared_ptr<Communicator>();
  }
  if (child == nullptr) {
    return absl::InternalError(absl::StrCat(what, ": NCCL returned no communicator for a member"));
  }
  int count = 0;
  int rank = -1;
  if (ncclCommCount(child, &count) != ncclSuccess ||
      ncclCommUserRank(child, &rank) != ncclSuccess || count != config.world_size ||
      rank != config.rank) {
    ncclCommAbort(child);
    return absl::InternalError(absl::StrCat(
        what, ": NCCL made a communicator of ", count, " ranks with this rank as ", rank,
        " but the group has ", config.world_size, " ranks with this rank as ", config.rank));
  }
  CommSettings settings;
  settings.rank = config.rank;
  settings.world_size = config.world_size;
  settings.device = settings_.device;
  settings.group = group;
  settings.timeout = timeout;
  settings.store = config.store;  // a fresh namespace for the subgroup
  return Adopt(child, std::move(settings));
}

}  // namespace dist_nccl

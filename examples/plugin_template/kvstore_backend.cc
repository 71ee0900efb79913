// kvstore: a complete dist backend plugin that moves every byte through the
// rendezvous key-value store. It is the SDK tutorial's example
// (sdk/README.md), written on the SDK's C++ plugin adapter
// (dist/cpp/backend_adapter.hpp): the adapter owns the C table, the
// struct_size rules, NULL and common argument checks, the exception guard and
// host logging, so this file holds only what is kvstore's own. It builds
// outside any source tree against the installed SDK and Abseil (Makefile).
//
// It is correct for any world size but slow. For your own backend, copy it,
// keep the plumbing (one worker thread per communicator runs operations in
// issue order; abort; every wait bounded) and replace RunCollective, Send and
// Recv with your library's calls.
//
// Store keys: collective number k publishes this rank's bytes under
// "kv/<k>/<rank>" (block b, meant for rank b: "kv/<k>/<rank>/<b>") and reads
// its peers' keys; the last rank to finish deletes them. send/recv use
// "p2p/<src>/<dst>/<tag>/<seq>", seq counting messages per (peer, tag), so
// messages with one tag arrive in order.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/backend_adapter.hpp"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/store.hpp"

namespace kvstore {

// Every dtype but float16 and bfloat16.
constexpr uint32_t kDtypes = 1u << DIST_INT8 | 1u << DIST_UINT8 | 1u << DIST_INT32 |
                             1u << DIST_INT64 | 1u << DIST_FLOAT32 | 1u << DIST_FLOAT64;

// One operation, shared by the worker's queue and the caller's handle (which
// may be destroyed first: the operation still runs to its end).
struct Op {
  std::function<absl::Status()> run;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status status;

  void Finish(absl::Status result) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    status = std::move(result);
    done = true;
    cv.notify_all();
  }
  bool WaitFor(absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return done; });
  }
};

class KvstoreWork : public dist::BackendWork {
 public:
  explicit KvstoreWork(std::shared_ptr<Op> op) : op_(std::move(op)) {}

  absl::Status Wait(absl::Duration timeout) override {
    if (!op_->WaitFor(timeout)) {
      return absl::DeadlineExceededError(absl::StrCat("kvstore: operation still running after ",
                                                      absl::FormatDuration(timeout),
                                                      "; wait again or abort"));
    }
    std::lock_guard<std::mutex> lock(op_->mu);
    return op_->status;
  }

  absl::Status Test(bool* done) override {
    std::lock_guard<std::mutex> lock(op_->mu);
    *done = op_->done;
    return op_->status;
  }

 private:
  std::shared_ptr<Op> op_;
};

// kvstore's own argument checks; the adapter has already checked roots,
// peers, counts, dtypes against each other and reduce ops.
absl::Status CheckBuffers(dist_collective_t kind, const dist_op_args_t& args, int rank) {
  DIST_RETURN_IF_ERROR(dist::RequireDevice(kind, args, rank, DIST_DEVICE_CPU, "kvstore",
                                           "kvstore takes CPU buffers only",
                                           "copy the data to host memory first"));
  const dist::UsedBuffers used = dist::BuffersUsed(kind, args, rank);
  const dist_dtype_t dtype = used.send ? args.send.dtype : args.recv.dtype;
  if ((used.send || used.recv) && (kDtypes & 1u << dtype) == 0) {
    return absl::UnimplementedError(
        absl::StrCat("kvstore: ", dist_collective_name(kind), ": dtype ", dist_dtype_name(dtype),
                     " is not supported; use int8, uint8, int32, int64, float32 or float64"));
  }
  return absl::OkStatus();
}

size_t Bytes(const dist_buffer_t& b, uint64_t count) { return count * dist_dtype_size(b.dtype); }

class KvstoreComm : public dist::BackendComm {
 public:
  explicit KvstoreComm(const dist_comm_config_t& config)
      : rank_(config.rank),
        world_(config.world_size),
        store_(config.store),
        timeout_(absl::Milliseconds(config.timeout_ms > 0 ? config.timeout_ms : 300000)),
        worker_([this] { WorkerLoop(); }) {}

  // comm_destroy: lets outstanding work finish, but never waits past the
  // timeout; then aborts what is left and stops the worker.
  ~KvstoreComm() override {
    std::shared_ptr<Op> last;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last = last_;
    }
    if (last != nullptr && !last->WaitFor(timeout_)) {
      Abort("communicator destroyed with work still pending");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    queue_cv_.notify_all();
    worker_.join();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }

  absl::StatusOr<std::unique_ptr<dist::BackendWork>> Issue(dist_collective_t kind,
                                                           const dist_op_args_t& args) override {
    DIST_RETURN_IF_ERROR(CheckBuffers(kind, args, rank_));
    const absl::Duration timeout =
        args.timeout_ms > 0 ? absl::Milliseconds(args.timeout_ms) : timeout_;
    auto op = std::make_shared<Op>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      DIST_RETURN_IF_ERROR(abort_status_);
      // Numbered in issue order, the order every rank shares.
      if (kind == DIST_COLL_SEND) {
        const uint64_t seq = sent_[{args.peer, args.tag}]++;
        op->run = [this, args, seq] { return Send(args, seq); };
      } else if (kind == DIST_COLL_RECV) {
        const uint64_t seq = received_[{args.peer, args.tag}]++;
        op->run = [this, args, seq, timeout] { return Recv(args, seq, absl::Now() + timeout); };
      } else {
        const uint64_t k = next_collective_++;
        op->run = [this, kind, args, k, timeout] {
          return RunCollective(kind, k, args, absl::Now() + timeout);
        };
      }
      queue_.push_back(op);
      last_ = op;
    }
    queue_cv_.notify_all();
    return std::make_unique<KvstoreWork>(std::move(op));
  }

  void Abort(const std::string& reason) override {
    std::deque<std::shared_ptr<Op>> dropped;
    absl::Status aborted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abort_status_.ok()) {
        abort_status_ = absl::AbortedError("kvstore: communicator aborted: " + reason);
      }
      aborted = abort_status_;
      dropped.swap(queue_);  // never started: fail them now
    }
    for (auto& op : dropped) op->Finish(aborted);
    queue_cv_.notify_all();
  }

 private:
  // One worker runs the queue in order: operations complete in issue order.
  void WorkerLoop() {
    for (;;) {
      std::shared_ptr<Op> op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      absl::Status status = op->run();
      if (status.ok()) status = AbortStatus();
      op->Finish(std::move(status));
    }
  }

  absl::Status AbortStatus() {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_status_;
  }

  // Gets `key` in short slices, so that an abort or the deadline is noticed
  // soon: nothing blocks forever.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline,
                                  const std::string& what) {
    for (;;) {
      DIST_RETURN_IF_ERROR(AbortStatus());
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(absl::StrCat(
            "kvstore: ", what, " did not arrive within the timeout (store key ", key,
            "); check that every rank issues the same operations in the same order and that no "
            "rank died"));
      }
      absl::StatusOr<std::string> value =
          store_.Get(key, std::clamp(left, absl::Milliseconds(1), absl::Milliseconds(100)));
      if (value.ok() || !absl::IsDeadlineExceeded(value.status())) return value;
    }
  }

  // Gets `key` into `out`, which must be exactly `bytes` long.
  absl::Status Fetch(const std::string& key, int32_t from, absl::Time deadline, void* out,
                     size_t bytes) {
    absl::StatusOr<std::string> value = Get(key, deadline, absl::StrCat("data of rank ", from));
    if (!value.ok()) return value.status();
    if (value->size() != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("kvstore: rank ", from, " contributed ", value->size(), " bytes where rank ",
                       rank_, " expects ", bytes, "; counts and dtypes must agree on every rank"));
    }
    if (bytes > 0) std::memcpy(out, value->data(), bytes);
    return absl::OkStatus();
  }

  static std::string Key(uint64_t k, int32_t rank, int32_t block = -1) {
    return block < 0 ? absl::StrCat("kv/", k, "/", rank)
                     : absl::StrCat("kv/", k, "/", rank, "/", block);
  }

  absl::Status Publish(const std::string& key, const void* data, size_t bytes) {
    return store_.Set(key, std::string(static_cast<const char*>(data), bytes));
  }

  // Fetches every rank's Key(k, r, block) and reduces in rank order, the
  // same order on every rank, so that results agree bit for bit.
  absl::Status FetchAndReduce(uint64_t k, int32_t block, const dist_op_args_t& a, uint64_t n,
                              absl::Time deadline, void* out) {
    const size_t bytes = Bytes(a.send, n);
    std::vector<char> acc(bytes), in(bytes);
    for (int32_t r = 0; r < world_; ++r) {
      DIST_RETURN_IF_ERROR(
          Fetch(Key(k, r, block), r, deadline, r == 0 ? acc.data() : in.data(), bytes));
      if (r > 0) dist::ReduceInto(a.send.dtype, a.op, acc.data(), in.data(), n);
    }
    if (a.op == DIST_AVG) dist::FinishAverage(a.send.dtype, acc.data(), n, world_);
    if (bytes > 0) std::memmove(out, acc.data(), bytes);
    return absl::OkStatus();
  }

  // Collective number k. The part to replace with your library's calls.
  absl::Status RunCollective(dist_collective_t kind, uint64_t k, const dist_op_args_t& a,
                             absl::Time deadline) {
    const int32_t me = rank_;
    const int32_t world = world_;
    const char* send = static_cast<const char*>(a.send.data);
    char* recv = static_cast<char*>(a.recv.data);
    switch (kind) {
      case DIST_COLL_ALL_REDUCE:
      case DIST_COLL_REDUCE: {
        const uint64_t n = a.send.count;
        DIST_RETURN_IF_ERROR(Publish(Key(k, me), send, Bytes(a.send, n)));
        if (kind == DIST_COLL_ALL_REDUCE || me == a.root) {
          DIST_RETURN_IF_ERROR(FetchAndReduce(k, -1, a, n, deadline, recv));
        }
        break;
      }
      case DIST_COLL_BROADCAST: {
        const size_t bytes = Bytes(a.recv, a.recv.count);
        if (me == a.root) {
          DIST_RETURN_IF_ERROR(Publish(Key(k, me), send, bytes));
          if (send != recv && bytes > 0) std::memcpy(recv, send, bytes);
        } else {
          DIST_RETURN_IF_ERROR(Fetch(Key(k, a.root), a.root, deadline, recv, bytes));
        }
        break;
      }
      case DIST_COLL_ALL_GATHER:
      case DIST_COLL_GATHER: {
        const size_t bytes = Bytes(a.send, a.send.count);
        DIST_RETURN_IF_ERROR(Publish(Key(k, me), send, bytes));
        if (kind == DIST_COLL_ALL_GATHER || me == a.root) {
          for (int32_t r = 0; r < world; ++r) {
            DIST_RETURN_IF_ERROR(Fetch(Key(k, r), r, deadline, recv + r * bytes, bytes));
          }
        }
        break;
      }
      case DIST_COLL_SCATTER: {
        const size_t bytes = Bytes(a.recv, a.recv.count);
        if (me == a.root) {
          for (int32_t b = 0; b < world; ++b) {
            DIST_RETURN_IF_ERROR(Publish(Key(k, me, b), send + b * bytes, bytes));
          }
        }
        DIST_RETURN_IF_ERROR(Fetch(Key(k, a.root, me), a.root, deadline, recv, bytes));
        break;
      }
      case DIST_COLL_REDUCE_SCATTER: {
        const size_t bytes = Bytes(a.recv, a.recv.count);
        for (int32_t b = 0; b < world; ++b) {
          DIST_RETURN_IF_ERROR(Publish(Key(k, me, b), send + b * bytes, bytes));
        }
        DIST_RETURN_IF_ERROR(FetchAndReduce(k, me, a, a.recv.count, deadline, recv));
        break;
      }
      case DIST_COLL_ALL_TO_ALL: {
        const size_t bytes = Bytes(a.send, a.send.count / world);
        for (int32_t b = 0; b < world; ++b) {
          DIST_RETURN_IF_ERROR(Publish(Key(k, me, b), send + b * bytes, bytes));
        }
        for (int32_t r = 0; r < world; ++r) {
          DIST_RETURN_IF_ERROR(Fetch(Key(k, r, me), r, deadline, recv + r * bytes, bytes));
        }
        break;
      }
      case DIST_COLL_BARRIER: {
        DIST_RETURN_IF_ERROR(Publish(Key(k, me), "", 0));
        for (int32_t r = 0; r < world; ++r) {
          DIST_RETURN_IF_ERROR(Fetch(Key(k, r), r, deadline, nullptr, 0));
        }
        break;
      }
      default:
        return absl::InternalError("kvstore: not a collective");
    }
    const bool blocks = kind == DIST_COLL_SCATTER || kind == DIST_COLL_REDUCE_SCATTER ||
                        kind == DIST_COLL_ALL_TO_ALL;
    return Done(k, blocks ? world : 0);
  }

  // Every rank calls Done once per collective; the last one removes its keys.
  absl::Status Done(uint64_t k, int32_t blocks) {
    const std::string done_key = absl::StrCat("kv/", k, "/done");
    absl::StatusOr<int64_t> finished = store_.Add(done_key, 1);
    if (!finished.ok() || *finished < world_) return finished.status();
    for (int32_t r = 0; r < world_; ++r) {
      store_.Remove(Key(k, r)).IgnoreError();
      for (int32_t b = 0; b < blocks; ++b) store_.Remove(Key(k, r, b)).IgnoreError();
    }
    store_.Remove(done_key).IgnoreError();
    return absl::OkStatus();
  }

  static std::string P2pKey(int32_t src, int32_t dst, int64_t tag, uint64_t seq) {
    return absl::StrCat("p2p/", src, "/", dst, "/", tag, "/", seq);
  }

  absl::Status Send(const dist_op_args_t& a, uint64_t seq) {
    return Publish(P2pKey(rank_, a.peer, a.tag, seq), a.send.data, Bytes(a.send, a.send.count));
  }

  absl::Status Recv(const dist_op_args_t& a, uint64_t seq, absl::Time deadline) {
    const std::string key = P2pKey(a.peer, rank_, a.tag, seq);
    const std::string what = absl::StrCat("message from rank ", a.peer, " with tag ", a.tag);
    absl::StatusOr<std::string> value = Get(key, deadline, what);
    if (!value.ok()) return value.status();
    const size_t bytes = Bytes(a.recv, a.recv.count);
    if (value->size() != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("kvstore: ", what, " has ", value->size(), " bytes, recv expects ", bytes));
    }
    if (bytes > 0) std::memcpy(a.recv.data, value->data(), bytes);
    store_.Remove(key).IgnoreError();
    return absl::OkStatus();
  }

  const int32_t rank_;
  const int32_t world_;
  const dist::StoreView store_;  // borrowed until comm_destroy returns
  const absl::Duration timeout_;

  std::mutex mu_;
  std::condition_variable queue_cv_;
  std::deque<std::shared_ptr<Op>> queue_;  // guarded by mu_, like the rest
  bool stopping_ = false;
  absl::Status abort_status_;  // ABORTED with the reason once aborted
  uint64_t next_collective_ = 0;
  std::map<std::pair<int32_t, int64_t>, uint64_t> sent_;  // (peer, tag) -> messages
  std::map<std::pair<int32_t, int64_t>, uint64_t> received_;
  std::shared_ptr<Op> last_;  // the last operation issued
  std::thread worker_;        // last: starts once the members above exist
};

class KvstoreBackend : public dist::Backend {
 public:
  const char* name() const override { return "kvstore"; }
  const char* version() const override { return "1.0.0"; }
  const char* LibraryVersion() override { return "kvstore 1.0 (the rendezvous store)"; }

  void Capabilities(dist_backend_capabilities_t& caps) override {
    caps.device_types = 1u << DIST_DEVICE_CPU;
    caps.dtypes = kDtypes;
    caps.collectives = dist::kAllCollectives;
    caps.all_reduce_ops = caps.reduce_ops = caps.reduce_scatter_ops = dist::kAllReduceOps;
    caps.flags = DIST_CAP_THREAD_MULTIPLE;
    caps.notes = "moves every byte through the rendezvous store: a template, not for speed";
  }

  absl::StatusOr<std::unique_ptr<dist::BackendComm>> CreateComm(
      const dist_comm_config_t& config) override {
    if (config.store == nullptr) {
      return absl::InvalidArgumentError("kvstore: comm_create needs a store");
    }
    if (config.world_size < 1 || config.rank < 0 || config.rank >= config.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kvstore: rank ", config.rank, " is out of range for world size ", config.world_size));
    }
    const char* group = config.group_name != nullptr ? config.group_name : "default";
    dist::Log(DIST_LOG_DEBUG, absl::StrCat("communicator ", group, " rank ", config.rank, " of ",
                                           config.world_size, " created"));
    return std::make_unique<KvstoreComm>(config);
  }

  // No comm_split: the core makes a subgroup with comm_create on its members.
  bool has_split() const override { return false; }
};

}  // namespace kvstore

// The one exported symbol, dist_backend_plugin_v1 (plugin.lds hides the rest).
DIST_EXPORT_BACKEND_PLUGIN(kvstore::KvstoreBackend)

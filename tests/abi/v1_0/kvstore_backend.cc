// FROZEN: a verbatim copy of the 1.0 template examples/plugin_template/kvstore_backend.cc
// (plain C ABI), the source of //tests/abi:libdist-backend-kvstore_v1_0.so. Never edit
// this file: it stands for an old third-party plugin, and must not follow the template.
// kvstore: a complete dist backend plugin that moves data through the
// rendezvous key-value store. It is the SDK tutorial's example (see
// sdk/README.md): small, written only against the C headers of the SDK and
// the C++ standard library, so it builds outside any source tree with
//
//   c++ -std=c++17 -shared -fPIC $(pkg-config --cflags dist) ...
//
// It is correct for any world size but slow (every byte goes through the
// store); copy it, keep the plumbing (table, work handles, ordering, abort)
// and replace the bodies of the Run* functions with your library's calls.
//
// Design:
// - Each communicator has one worker thread that runs operations in issue
//   order, so every call returns at once with a work handle (asynchronous).
// - Collective number k publishes this rank's bytes under "kv/<k>/<rank>"
//   and reads the peers' keys; the last rank to finish deletes them.
// - send/recv use "p2p/<src>/<dst>/<tag>/<seq>", seq counting messages per
//   (peer, tag), so messages with one tag arrive in order.
// - Every wait on the store is sliced into short waits, so that an abort or a
//   timeout is noticed quickly; nothing blocks forever.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "dist/backend_plugin.h"

namespace kvstore {

using Clock = std::chrono::steady_clock;

const dist_host_api_t* g_host = nullptr;

void Log(dist_log_level_t level, const std::string& message) {
  if (g_host != nullptr && g_host->log_enabled(level)) {
    g_host->log(level, "kvstore", message.c_str());
  }
}

// An error inside the plugin: code DIST_OK means success. Converted to a
// dist_error_t only at the ABI boundary.
struct Status {
  dist_error_code_t code = DIST_OK;
  std::string message;
  bool ok() const { return code == DIST_OK; }
};

Status Error(dist_error_code_t code, std::string message) {
  return Status{code, "kvstore: " + std::move(message)};
}

dist_error_t* ToError(const Status& status) {
  if (status.ok()) return nullptr;
  return dist_error_new(status.code, "%s", status.message.c_str());
}

Status TakeError(dist_error_t* error) {
  if (error == nullptr) return Status{};
  Status status{error->code, error->message};
  dist_error_destroy(error);
  return status;
}

// ---- Work: one operation, shared by the queue and the caller's handle ----

struct WorkState {
  std::function<Status()> run;
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  Status result;

  void Finish(Status status) {
    std::lock_guard<std::mutex> lock(mu);
    if (done) return;
    result = std::move(status);
    done = true;
    done_cv.notify_all();
  }
};

}  // namespace kvstore

// The ABI's opaque handle types, defined by this plugin (global names: the
// ABI declares them as struct dist_backend_work / dist_backend_comm).
struct dist_backend_work {
  std::shared_ptr<kvstore::WorkState> state;
};

struct dist_backend_comm {
  int32_t rank = 0;
  int32_t world_size = 1;
  dist_store_t* store = nullptr;  // borrowed until comm_destroy returns
  int64_t timeout_ms = 300000;
  std::string group_name;

  std::mutex mu;
  std::condition_variable queue_cv;
  std::deque<std::shared_ptr<kvstore::WorkState>> queue;
  bool stopping = false;
  bool aborted = false;
  std::string abort_reason;
  uint64_t next_collective = 0;                          // guarded by mu
  std::map<std::pair<int32_t, int64_t>, uint64_t> sent;  // (peer, tag) -> count
  std::map<std::pair<int32_t, int64_t>, uint64_t> received;
  std::thread worker;

  bool IsAborted(std::string* reason) {
    std::lock_guard<std::mutex> lock(mu);
    if (aborted && reason != nullptr) *reason = abort_reason;
    return aborted;
  }
};

namespace kvstore {

Status Aborted(const std::string& reason) {
  return Error(DIST_ABORTED, "communicator aborted: " + reason);
}

// ---- The store, with waits sliced so abort and timeouts are noticed -------

Status StoreSet(dist_backend_comm* comm, const std::string& key, const void* data, size_t size) {
  return TakeError(comm->store->set(comm->store->ctx, key.c_str(), data, size));
}

Status StoreGet(dist_backend_comm* comm, const std::string& key, int64_t timeout_ms,
                std::string* value, const char* what) {
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    std::string reason;
    if (comm->IsAborted(&reason)) return Aborted(reason);
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return Error(DIST_DEADLINE_EXCEEDED,
                   std::string(what) + " did not arrive within " + std::to_string(timeout_ms) +
                       " ms (store key " + key +
                       "); check that every rank issues the same "
                       "operations in the same order and that no rank died");
    }
    void* data = nullptr;
    size_t size = 0;
    dist_error_t* error =
        comm->store->get(comm->store->ctx, key.c_str(), std::min<int64_t>(left, 100), &data, &size);
    if (error == nullptr) {
      value->assign(static_cast<const char*>(data), size);
      comm->store->free_value(comm->store->ctx, data);
      return Status{};
    }
    if (error->code != DIST_DEADLINE_EXCEEDED) return TakeError(error);
    dist_error_destroy(error);
  }
}

// ---- Reductions on the CPU ----------------------------------------------

template <typename T>
void ReduceTyped(dist_reduce_op_t op, T* acc, const T* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    switch (op) {
      case DIST_SUM:
      case DIST_AVG:
        acc[i] = static_cast<T>(acc[i] + in[i]);
        break;
      case DIST_PRODUCT:
        acc[i] = static_cast<T>(acc[i] * in[i]);
        break;
      case DIST_MIN:
        acc[i] = std::min(acc[i], in[i]);
        break;
      case DIST_MAX:
        acc[i] = std::max(acc[i], in[i]);
        break;
      default:
        if constexpr (std::is_integral_v<T>) {
          if (op == DIST_BAND) acc[i] = static_cast<T>(acc[i] & in[i]);
          if (op == DIST_BOR) acc[i] = static_cast<T>(acc[i] | in[i]);
          if (op == DIST_BXOR) acc[i] = static_cast<T>(acc[i] ^ in[i]);
        }
        break;
    }
  }
}

template <typename T>
void Divide(T* acc, size_t n, int world) {
  for (size_t i = 0; i < n; ++i) acc[i] = static_cast<T>(acc[i] / world);
}

template <typename F>
void Dispatch(dist_dtype_t dtype, F&& f) {
  switch (dtype) {
    case DIST_INT8:
      f(int8_t{});
      break;
    case DIST_UINT8:
      f(uint8_t{});
      break;
    case DIST_INT32:
      f(int32_t{});
      break;
    case DIST_INT64:
      f(int64_t{});
      break;
    case DIST_FLOAT32:
      f(float{});
      break;
    case DIST_FLOAT64:
      f(double{});
      break;
    default:
      break;  // rejected by Validate
  }
}

void Reduce(dist_dtype_t dtype, dist_reduce_op_t op, void* acc, const void* in, size_t n) {
  Dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    ReduceTyped(op, static_cast<T*>(acc), static_cast<const T*>(in), n);
  });
}

void FinishAverage(dist_dtype_t dtype, void* acc, size_t n, int world) {
  Dispatch(dtype, [&](auto tag) { Divide(static_cast<decltype(tag)*>(acc), n, world); });
}

// ---- Capabilities and argument checks -----------------------------------

constexpr uint32_t kDtypes = 1u << DIST_INT8 | 1u << DIST_UINT8 | 1u << DIST_INT32 |
                             1u << DIST_INT64 | 1u << DIST_FLOAT32 | 1u << DIST_FLOAT64;
constexpr uint32_t kOps = (1u << DIST_REDUCE_OP_COUNT) - 1;  // all eight

bool IsBitwise(dist_reduce_op_t op) { return op == DIST_BAND || op == DIST_BOR || op == DIST_BXOR; }

void GetCapabilities(dist_backend_capabilities_t* caps) {
  // Write only the fields the caller's struct has (it may be older).
  dist_backend_capabilities_t mine;
  std::memset(&mine, 0, sizeof(mine));
  mine.struct_size = sizeof(mine);
  mine.device_types = 1u << DIST_DEVICE_CPU;
  mine.dtypes = kDtypes;
  mine.collectives = (1u << DIST_COLLECTIVE_COUNT) - 1;
  mine.all_reduce_ops = kOps;
  mine.reduce_ops = kOps;
  mine.reduce_scatter_ops = kOps;
  mine.flags = DIST_CAP_THREAD_MULTIPLE;
  mine.notes = "moves every byte through the rendezvous store: a template, not for speed";
  const size_t size = std::min(caps->struct_size, sizeof(mine));
  std::memcpy(caps, &mine, size);
  caps->struct_size = size;
}

Status CheckBuffer(const char* role, const dist_buffer_t& b) {
  if (b.device.type != DIST_DEVICE_CPU) {
    return Error(DIST_UNIMPLEMENTED, std::string(role) + " buffer is on device " +
                                         dist_device_type_name(b.device.type) +
                                         "; kvstore takes CPU buffers only");
  }
  if (dist_dtype_size(b.dtype) == 0 || (kDtypes & (1u << b.dtype)) == 0) {
    return Error(DIST_UNIMPLEMENTED, std::string(role) + " dtype " + dist_dtype_name(b.dtype) +
                                         " is not supported; use int8, uint8, int32, int64, "
                                         "float32 or float64");
  }
  if (b.data == nullptr && b.count > 0) {
    return Error(DIST_INVALID_ARGUMENT, std::string(role) + " buffer has count " +
                                            std::to_string(b.count) + " but no data");
  }
  return Status{};
}

Status CheckOp(dist_dtype_t dtype, dist_reduce_op_t op) {
  if (static_cast<int>(op) < 0 || op >= DIST_REDUCE_OP_COUNT) {
    return Error(DIST_INVALID_ARGUMENT, "unknown reduce op " + std::to_string(op));
  }
  if (IsBitwise(op) && dist_dtype_is_floating(dtype)) {
    return Error(DIST_INVALID_ARGUMENT, std::string("reduce op ") + dist_reduce_op_name(op) +
                                            " is bitwise and " + dist_dtype_name(dtype) +
                                            " is floating point; use an integer dtype");
  }
  return Status{};
}

Status CheckRank(const char* role, int32_t value, int32_t world) {
  if (value < 0 || value >= world) {
    return Error(DIST_INVALID_ARGUMENT, std::string(role) + " " + std::to_string(value) +
                                            " is out of range [0, " + std::to_string(world) + ")");
  }
  return Status{};
}

// Counts are exact (backend_plugin.h): a larger buffer is an error too.
Status NeedCount(const char* what, uint64_t have, uint64_t need) {
  if (have != need) {
    return Error(DIST_INVALID_ARGUMENT, std::string(what) + " holds " + std::to_string(have) +
                                            " elements but must hold " + std::to_string(need));
  }
  return Status{};
}

// ---- The operations (run on the worker thread) ------------------------------

size_t Bytes(const dist_buffer_t& b, uint64_t count) { return count * dist_dtype_size(b.dtype); }

std::string Key(uint64_t k, int32_t rank) {
  return "kv/" + std::to_string(k) + "/" + std::to_string(rank);
}
std::string Key(uint64_t k, int32_t rank, int32_t block) {
  return Key(k, rank) + "/" + std::to_string(block);
}

// One collective's view of the store: publish, fetch with a size check, and
// delete everything once the last rank is done.
class Exchange {
 public:
  Exchange(dist_backend_comm* comm, uint64_t k, int64_t timeout_ms, bool blocks)
      : comm_(comm), k_(k), timeout_ms_(timeout_ms), blocks_(blocks) {}

  Status Publish(const std::string& key, const void* data, size_t size) {
    return StoreSet(comm_, key, data, size);
  }

  Status Fetch(const std::string& key, int32_t from, size_t expected, void* out) {
    std::string value;
    Status status =
        StoreGet(comm_, key, timeout_ms_, &value, ("data of rank " + std::to_string(from)).c_str());
    if (!status.ok()) return status;
    if (value.size() != expected) {
      return Error(DIST_INVALID_ARGUMENT,
                   "rank " + std::to_string(from) + " contributed " + std::to_string(value.size()) +
                       " bytes where rank " + std::to_string(comm_->rank) + " expects " +
                       std::to_string(expected) + "; counts and dtypes must agree on every rank");
    }
    if (expected > 0) std::memcpy(out, value.data(), expected);
    return Status{};
  }

  // Every rank calls Done once; the last one removes the operation's keys.
  Status Done() {
    int64_t finished = 0;
    const std::string done_key = "kv/" + std::to_string(k_) + "/done";
    Status status = TakeError(comm_->store->add(comm_->store->ctx, done_key.c_str(), 1, &finished));
    if (!status.ok() || finished < comm_->world_size) return status;
    for (int32_t r = 0; r < comm_->world_size; ++r) {
      Remove(Key(k_, r));
      for (int32_t b = 0; blocks_ && b < comm_->world_size; ++b) Remove(Key(k_, r, b));
    }
    Remove(done_key);
    return Status{};
  }

 private:
  void Remove(const std::string& key) {
    dist_error_destroy(comm_->store->remove(comm_->store->ctx, key.c_str(), nullptr));
  }

  dist_backend_comm* comm_;
  uint64_t k_;
  int64_t timeout_ms_;
  bool blocks_;
};

#define KV_RETURN_IF_ERROR(expr)             \
  do {                                       \
    Status kv_status_ = (expr);              \
    if (!kv_status_.ok()) return kv_status_; \
  } while (0)

// Fetches every rank's contribution under Key(k, r[, block]) and reduces them
// in rank order (the same order on every rank, so results agree bit for bit).
Status FetchAndReduce(Exchange& ex, dist_backend_comm* comm, uint64_t k, int block,
                      const dist_op_args_t& a, uint64_t n, void* out) {
  const size_t bytes = Bytes(a.send, n);
  std::vector<char> acc(bytes), in(bytes);
  for (int32_t r = 0; r < comm->world_size; ++r) {
    const std::string key = block < 0 ? Key(k, r) : Key(k, r, block);
    KV_RETURN_IF_ERROR(ex.Fetch(key, r, bytes, r == 0 ? acc.data() : in.data()));
    if (r > 0) Reduce(a.send.dtype, a.op, acc.data(), in.data(), n);
  }
  if (a.op == DIST_AVG) FinishAverage(a.send.dtype, acc.data(), n, comm->world_size);
  if (bytes > 0) std::memmove(out, acc.data(), bytes);
  return Status{};
}

Status RunCollective(dist_collective_t coll, dist_backend_comm* comm, uint64_t k,
                     const dist_op_args_t& a, int64_t timeout_ms) {
  const int32_t me = comm->rank;
  const int32_t world = comm->world_size;
  const bool blocks =
      coll == DIST_COLL_REDUCE_SCATTER || coll == DIST_COLL_ALL_TO_ALL || coll == DIST_COLL_SCATTER;
  Exchange ex(comm, k, timeout_ms, blocks);
  const char* send = static_cast<const char*>(a.send.data);
  char* recv = static_cast<char*>(a.recv.data);
  switch (coll) {
    case DIST_COLL_ALL_REDUCE: {
      const uint64_t n = std::min(a.send.count, a.recv.count);
      KV_RETURN_IF_ERROR(ex.Publish(Key(k, me), send, Bytes(a.send, n)));
      KV_RETURN_IF_ERROR(FetchAndReduce(ex, comm, k, -1, a, n, recv));
      break;
    }
    case DIST_COLL_REDUCE: {
      const uint64_t n = a.send.count;
      KV_RETURN_IF_ERROR(ex.Publish(Key(k, me), send, Bytes(a.send, n)));
      if (me == a.root) KV_RETURN_IF_ERROR(FetchAndReduce(ex, comm, k, -1, a, n, recv));
      break;
    }
    case DIST_COLL_BROADCAST: {
      const uint64_t n = a.recv.count;
      if (me == a.root) {
        KV_RETURN_IF_ERROR(ex.Publish(Key(k, me), send, Bytes(a.recv, n)));
        if (send != recv && n > 0) std::memcpy(recv, send, Bytes(a.recv, n));
      } else {
        KV_RETURN_IF_ERROR(ex.Fetch(Key(k, a.root), a.root, Bytes(a.recv, n), recv));
      }
      break;
    }
    case DIST_COLL_ALL_GATHER:
    case DIST_COLL_GATHER: {
      const uint64_t n = a.send.count;
      const size_t bytes = Bytes(a.send, n);
      KV_RETURN_IF_ERROR(ex.Publish(Key(k, me), send, bytes));
      if (coll == DIST_COLL_ALL_GATHER || me == a.root) {
        for (int32_t r = 0; r < world; ++r) {
          KV_RETURN_IF_ERROR(ex.Fetch(Key(k, r), r, bytes, recv + r * bytes));
        }
      }
      break;
    }
    case DIST_COLL_SCATTER: {
      const uint64_t n = a.recv.count;
      const size_t bytes = Bytes(a.recv, n);
      if (me == a.root) {
        for (int32_t b = 0; b < world; ++b) {
          KV_RETURN_IF_ERROR(ex.Publish(Key(k, me, b), send + b * bytes, bytes));
        }
      }
      KV_RETURN_IF_ERROR(ex.Fetch(Key(k, a.root, me), a.root, bytes, recv));
      break;
    }
    case DIST_COLL_REDUCE_SCATTER: {
      const uint64_t n = a.recv.count;
      const size_t bytes = Bytes(a.recv, n);
      for (int32_t b = 0; b < world; ++b) {
        KV_RETURN_IF_ERROR(ex.Publish(Key(k, me, b), send + b * bytes, bytes));
      }
      KV_RETURN_IF_ERROR(FetchAndReduce(ex, comm, k, me, a, n, recv));
      break;
    }
    case DIST_COLL_ALL_TO_ALL: {
      const uint64_t n = a.send.count / world;
      const size_t bytes = Bytes(a.send, n);
      for (int32_t b = 0; b < world; ++b) {
        KV_RETURN_IF_ERROR(ex.Publish(Key(k, me, b), send + b * bytes, bytes));
      }
      for (int32_t r = 0; r < world; ++r) {
        KV_RETURN_IF_ERROR(ex.Fetch(Key(k, r, me), r, bytes, recv + r * bytes));
      }
      break;
    }
    case DIST_COLL_BARRIER: {
      KV_RETURN_IF_ERROR(ex.Publish(Key(k, me), "", 0));
      char unused;
      for (int32_t r = 0; r < world; ++r) KV_RETURN_IF_ERROR(ex.Fetch(Key(k, r), r, 0, &unused));
      break;
    }
    default:
      return Error(DIST_INTERNAL, "not a collective");
  }
  return ex.Done();
}

std::string P2pKey(int32_t src, int32_t dst, int64_t tag, uint64_t seq) {
  return "p2p/" + std::to_string(src) + "/" + std::to_string(dst) + "/" + std::to_string(tag) +
         "/" + std::to_string(seq);
}

// ---- Issuing ----------------------------------------------------------------

Status Validate(dist_collective_t coll, const dist_backend_comm* comm, const dist_op_args_t& a) {
  const int32_t me = comm->rank;
  const uint64_t world = static_cast<uint64_t>(comm->world_size);
  const bool reduces =
      coll == DIST_COLL_ALL_REDUCE || coll == DIST_COLL_REDUCE || coll == DIST_COLL_REDUCE_SCATTER;
  const bool rooted = coll == DIST_COLL_BROADCAST || coll == DIST_COLL_REDUCE ||
                      coll == DIST_COLL_GATHER || coll == DIST_COLL_SCATTER;
  if (coll == DIST_COLL_BARRIER) return Status{};
  if (rooted) KV_RETURN_IF_ERROR(CheckRank("root", a.root, comm->world_size));
  if (coll == DIST_COLL_SEND || coll == DIST_COLL_RECV) {
    KV_RETURN_IF_ERROR(CheckRank("peer", a.peer, comm->world_size));
    return CheckBuffer(coll == DIST_COLL_SEND ? "send" : "recv",
                       coll == DIST_COLL_SEND ? a.send : a.recv);
  }
  // Which buffers this rank really uses.
  const bool uses_send =
      !(coll == DIST_COLL_BROADCAST || coll == DIST_COLL_SCATTER) || me == a.root;
  const bool uses_recv = !(coll == DIST_COLL_REDUCE || coll == DIST_COLL_GATHER) || me == a.root;
  if (uses_send) KV_RETURN_IF_ERROR(CheckBuffer("send", a.send));
  if (uses_recv) KV_RETURN_IF_ERROR(CheckBuffer("recv", a.recv));
  if (uses_send && uses_recv && a.send.dtype != a.recv.dtype) {
    return Error(DIST_INVALID_ARGUMENT, std::string("send dtype ") + dist_dtype_name(a.send.dtype) +
                                            " differs from recv dtype " +
                                            dist_dtype_name(a.recv.dtype));
  }
  const dist_dtype_t dtype = uses_send ? a.send.dtype : a.recv.dtype;
  if (reduces) KV_RETURN_IF_ERROR(CheckOp(dtype, a.op));
  switch (coll) {
    case DIST_COLL_ALL_REDUCE:
      return NeedCount("recv", a.recv.count, a.send.count);
    case DIST_COLL_REDUCE:
      if (me == a.root) return NeedCount("recv", a.recv.count, a.send.count);
      break;
    case DIST_COLL_BROADCAST:
      if (me == a.root) return NeedCount("send", a.send.count, a.recv.count);
      break;
    case DIST_COLL_ALL_GATHER:
      return NeedCount("recv", a.recv.count, a.send.count * world);
    case DIST_COLL_GATHER:
      if (me == a.root) return NeedCount("recv", a.recv.count, a.send.count * world);
      break;
    case DIST_COLL_SCATTER:
      if (me == a.root) return NeedCount("send", a.send.count, a.recv.count * world);
      break;
    case DIST_COLL_REDUCE_SCATTER:
      return NeedCount("send", a.send.count, a.recv.count * world);
    case DIST_COLL_ALL_TO_ALL:
      if (a.send.count % world != 0) {
        return Error(DIST_INVALID_ARGUMENT, "all_to_all count " + std::to_string(a.send.count) +
                                                " is not a multiple of the world size " +
                                                std::to_string(world));
      }
      return NeedCount("recv", a.recv.count, a.send.count);
    default:
      break;
  }
  return Status{};
}

dist_error_t* Issue(dist_collective_t coll, dist_backend_comm* comm, const dist_op_args_t* args,
                    dist_backend_work** work) {
  if (comm == nullptr || args == nullptr || work == nullptr) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "kvstore: %s called with a NULL argument",
                          dist_collective_name(coll));
  }
  // sdk/ABI.md: read what the caller's struct_size covers (it may be older or
  // newer); only a size below ABI 1.0's (which ends with timeout_ms) is wrong.
  if (args->struct_size < offsetof(dist_op_args_t, timeout_ms) + sizeof(int64_t)) {
    return dist_error_new(DIST_INVALID_ARGUMENT,
                          "kvstore: %s: args->struct_size %zu is below "
                          "ABI 1.0's; set it to sizeof(dist_op_args_t)",
                          dist_collective_name(coll), args->struct_size);
  }
  dist_op_args_t a;
  std::memset(&a, 0, sizeof(a));
  std::memcpy(&a, args, std::min(args->struct_size, sizeof(a)));
  Status status = Validate(coll, comm, a);
  if (!status.ok()) {
    status.message +=
        std::string(" (") + dist_collective_name(coll) + " on group " + comm->group_name + ")";
    return ToError(status);
  }
  const int64_t timeout_ms = a.timeout_ms > 0 ? a.timeout_ms : comm->timeout_ms;
  auto state = std::make_shared<WorkState>();
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (comm->aborted) return ToError(Aborted(comm->abort_reason));
    if (coll == DIST_COLL_SEND) {
      const uint64_t seq = comm->sent[{a.peer, a.tag}]++;
      const std::string key = P2pKey(comm->rank, a.peer, a.tag, seq);
      state->run = [comm, key, a]() {
        return StoreSet(comm, key, a.send.data, Bytes(a.send, a.send.count));
      };
    } else if (coll == DIST_COLL_RECV) {
      const uint64_t seq = comm->received[{a.peer, a.tag}]++;
      const std::string key = P2pKey(a.peer, comm->rank, a.tag, seq);
      state->run = [comm, key, a, timeout_ms]() {
        std::string value;
        const std::string what =
            "message from rank " + std::to_string(a.peer) + " with tag " + std::to_string(a.tag);
        KV_RETURN_IF_ERROR(StoreGet(comm, key, timeout_ms, &value, what.c_str()));
        if (value.size() != Bytes(a.recv, a.recv.count)) {
          return Error(DIST_INVALID_ARGUMENT, what + " has " + std::to_string(value.size()) +
                                                  " bytes, recv expects " +
                                                  std::to_string(Bytes(a.recv, a.recv.count)));
        }
        if (!value.empty()) std::memcpy(a.recv.data, value.data(), value.size());
        dist_error_destroy(comm->store->remove(comm->store->ctx, key.c_str(), nullptr));
        return Status{};
      };
    } else {
      const uint64_t k = comm->next_collective++;
      state->run = [coll, comm, k, a, timeout_ms]() {
        return RunCollective(coll, comm, k, a, timeout_ms);
      };
    }
    comm->queue.push_back(state);
  }
  comm->queue_cv.notify_all();
  *work = new dist_backend_work{state};
  return nullptr;
}

void WorkerLoop(dist_backend_comm* comm) {
  for (;;) {
    std::shared_ptr<WorkState> next;
    {
      std::unique_lock<std::mutex> lock(comm->mu);
      comm->queue_cv.wait(lock, [&] { return comm->stopping || !comm->queue.empty(); });
      if (comm->queue.empty()) return;  // stopping and drained
      next = comm->queue.front();
      comm->queue.pop_front();
    }
    Status status = next->run();
    std::string reason;
    if (status.ok() && comm->IsAborted(&reason)) status = Aborted(reason);
    next->Finish(std::move(status));
  }
}

// ---- The ABI table ----------------------------------------------------------

dist_error_t* Initialize(const dist_host_api_t* host) {
  g_host = host;
  return nullptr;
}

const char* LibraryVersion(void) { return "kvstore 1.0 (the rendezvous store)"; }

dist_error_t* Probe(void) { return nullptr; }  // runs anywhere

dist_error_t* CommCreate(const dist_comm_config_t* config, dist_backend_comm** out) {
  if (config == nullptr || out == nullptr || config->store == nullptr) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "kvstore: comm_create needs a config and a store");
  }
  if (config->struct_size < offsetof(dist_comm_config_t, device_index) + sizeof(int32_t)) {
    return dist_error_new(DIST_INVALID_ARGUMENT,
                          "kvstore: config->struct_size %zu is below "
                          "ABI 1.0's; set it to sizeof(dist_comm_config_t)",
                          config->struct_size);
  }
  if (config->world_size < 1 || config->rank < 0 || config->rank >= config->world_size) {
    return dist_error_new(DIST_INVALID_ARGUMENT,
                          "kvstore: rank %d is out of range for world size %d", config->rank,
                          config->world_size);
  }
  auto* comm = new dist_backend_comm;
  comm->rank = config->rank;
  comm->world_size = config->world_size;
  comm->store = config->store;
  comm->timeout_ms = config->timeout_ms > 0 ? config->timeout_ms : 300000;
  comm->group_name = config->group_name != nullptr ? config->group_name : "default";
  comm->worker = std::thread(WorkerLoop, comm);
  Log(DIST_LOG_DEBUG, "communicator " + comm->group_name + " rank " + std::to_string(comm->rank) +
                          " of " + std::to_string(comm->world_size) + " created");
  *out = comm;
  return nullptr;
}

void CommAbort(dist_backend_comm* comm, const char* reason) {
  if (comm == nullptr) return;
  std::deque<std::shared_ptr<WorkState>> dropped;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (!comm->aborted) {
      comm->aborted = true;
      comm->abort_reason = reason != nullptr ? reason : "no reason given";
    }
    dropped.swap(comm->queue);  // never started: fail them now
  }
  for (auto& work : dropped) work->Finish(Aborted(comm->abort_reason));
  comm->queue_cv.notify_all();
}

void CommDestroy(dist_backend_comm* comm) {
  if (comm == nullptr) return;
  // Let outstanding work finish, but never wait past the timeout.
  std::shared_ptr<WorkState> last;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (!comm->queue.empty()) last = comm->queue.back();
  }
  if (last != nullptr) {
    std::unique_lock<std::mutex> lock(last->mu);
    if (!last->done_cv.wait_for(lock, std::chrono::milliseconds(comm->timeout_ms),
                                [&] { return last->done; })) {
      lock.unlock();
      CommAbort(comm, "communicator destroyed with work still pending");
    }
  }
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    comm->stopping = true;
  }
  comm->queue_cv.notify_all();
  comm->worker.join();
  delete comm;
}

dist_error_t* WorkWait(dist_backend_work* work, int64_t timeout_ms) {
  if (work == nullptr) return dist_error_new(DIST_INVALID_ARGUMENT, "kvstore: work_wait on NULL");
  WorkState& state = *work->state;
  std::unique_lock<std::mutex> lock(state.mu);
  if (!state.done_cv.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)),
                              [&] { return state.done; })) {
    return dist_error_new(DIST_DEADLINE_EXCEEDED,
                          "kvstore: operation still running after %lld ms; wait again or abort",
                          static_cast<long long>(timeout_ms));
  }
  return ToError(state.result);
}

dist_error_t* WorkTest(dist_backend_work* work, int* done) {
  if (work == nullptr || done == nullptr) {
    return dist_error_new(DIST_INVALID_ARGUMENT, "kvstore: work_test needs a work and a flag");
  }
  WorkState& state = *work->state;
  std::lock_guard<std::mutex> lock(state.mu);
  *done = state.done ? 1 : 0;
  return state.done ? ToError(state.result) : nullptr;
}

void WorkDestroy(dist_backend_work* work) { delete work; }

template <dist_collective_t kColl>
dist_error_t* Op(dist_backend_comm* comm, const dist_op_args_t* args, dist_backend_work** work) {
  return Issue(kColl, comm, args, work);
}

dist_backend_plugin_t MakeTable() {
  // Field by field, so that the same source builds against older headers
  // (fields appended later stay zero: NULL).
  dist_backend_plugin_t t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.abi_major = DIST_BACKEND_ABI_MAJOR;
  t.abi_minor = DIST_BACKEND_ABI_MINOR;
  t.name = "kvstore";
  t.version = "1.0.0";
  t.initialize = Initialize;
  t.library_version = LibraryVersion;
  t.probe = Probe;
  t.get_capabilities = GetCapabilities;
  t.comm_create = CommCreate;
  t.comm_split = nullptr;  // the core creates subgroups with comm_create
  t.comm_abort = CommAbort;
  t.comm_destroy = CommDestroy;
  t.all_reduce = Op<DIST_COLL_ALL_REDUCE>;
  t.broadcast = Op<DIST_COLL_BROADCAST>;
  t.reduce = Op<DIST_COLL_REDUCE>;
  t.all_gather = Op<DIST_COLL_ALL_GATHER>;
  t.gather = Op<DIST_COLL_GATHER>;
  t.scatter = Op<DIST_COLL_SCATTER>;
  t.reduce_scatter = Op<DIST_COLL_REDUCE_SCATTER>;
  t.all_to_all = Op<DIST_COLL_ALL_TO_ALL>;
  t.barrier = Op<DIST_COLL_BARRIER>;
  t.send = Op<DIST_COLL_SEND>;
  t.recv = Op<DIST_COLL_RECV>;
  t.work_wait = WorkWait;
  t.work_test = WorkTest;
  t.work_destroy = WorkDestroy;
  return t;
}

}  // namespace kvstore

// The one exported symbol (the version script hides everything else).
extern "C" DIST_EXPORT const dist_backend_plugin_t* dist_backend_plugin_v1(void) {
  static const dist_backend_plugin_t table = kvstore::MakeTable();
  return &table;
}

// kvstore: a complete dist backend plugin that moves every byte through the
// rendezvous key-value store. It is the SDK tutorial's example
// (sdk/README.md), written on the SDK's runtime (dist/cpp/runtime.hpp): the
// runtime runs operations in issue order, numbers them, owns work handles,
// deadlines, abort and revoke; the adapter under it owns the C table, the
// struct_size rules, the common argument checks, the exception guard and host
// logging. So this file holds only what is kvstore's own: a transport. It
// builds outside any source tree against the installed SDK and Abseil
// (Makefile). Copy it and replace Execute with your library's calls.
//
// Store keys: collective number k publishes this rank's bytes under
// "kv/<k>/<rank>" and reads its peers' keys; the last rank to finish deletes
// them. send/recv use "p2p/<src>/<dst>/<tag>/<seq>", seq counting messages
// per (peer, tag), so messages with one tag arrive in order.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/runtime.hpp"
#include "dist/cpp/store.hpp"

namespace kvstore {

// Every dtype but float16 and bfloat16.
constexpr uint32_t kDtypes =
    dist::Bits({DIST_INT8, DIST_UINT8, DIST_INT32, DIST_INT64, DIST_FLOAT32, DIST_FLOAT64});
constexpr uint32_t kCollectives =
    dist::Bits({DIST_COLL_ALL_REDUCE, DIST_COLL_BROADCAST, DIST_COLL_ALL_GATHER, DIST_COLL_BARRIER,
                DIST_COLL_SEND, DIST_COLL_RECV});

size_t Bytes(const dist_buffer_t& b) { return b.count * dist_dtype_size(b.dtype); }

class KvstoreTransport : public dist::Transport {
 public:
  explicit KvstoreTransport(const dist_comm_config_t& config)
      : rank_(config.rank), world_(config.world_size), store_(config.store) {}

  // kvstore's own checks; the adapter has checked roots, peers, counts,
  // dtypes against each other and reduce ops already.
  absl::Status Check(dist_collective_t kind, const dist_op_args_t& args) override {
    DIST_RETURN_IF_ERROR(dist::RequireDevice(kind, args, rank_, DIST_DEVICE_CPU, "kvstore",
                                             "kvstore takes CPU buffers only",
                                             "copy the data to host memory first"));
    const dist::UsedBuffers used = dist::BuffersUsed(kind, args, rank_);
    const dist_dtype_t dtype = used.send ? args.send.dtype : args.recv.dtype;
    if ((used.send || used.recv) && (kDtypes & 1u << dtype) == 0) {
      return absl::UnimplementedError(
          absl::StrCat("kvstore: ", dist_collective_name(kind), ": dtype ", dist_dtype_name(dtype),
                       " is not supported; use int8, uint8, int32, int64, float32 or float64"));
    }
    return absl::OkStatus();
  }

  // One operation, numbered op.seq by the runtime. The part to replace with
  // your library's calls.
  absl::Status Execute(const dist::Op& op, dist::OpContext& ctx) override {
    const dist_op_args_t& a = op.args;
    const char* send = static_cast<const char*>(a.send.data);
    char* recv = static_cast<char*>(a.recv.data);
    const std::string k = absl::StrCat("kv/", op.seq, "/");
    switch (op.kind) {
      case DIST_COLL_ALL_REDUCE: {
        DIST_RETURN_IF_ERROR(Publish(k + Me(), send, Bytes(a.send)));
        std::vector<char> in(Bytes(a.send));
        for (int32_t r = 0; r < world_; ++r) {  // in rank order: equal bits everywhere
          char* into = r == 0 ? recv : in.data();
          DIST_RETURN_IF_ERROR(Fetch(k, r, op, ctx, into, in.size()));
          if (r > 0) dist::ReduceInto(a.send.dtype, a.op, recv, in.data(), a.send.count);
        }
        if (a.op == DIST_AVG) dist::FinishAverage(a.send.dtype, recv, a.send.count, world_);
        break;
      }
      case DIST_COLL_BROADCAST:
        if (rank_ == a.root) {
          DIST_RETURN_IF_ERROR(Publish(k + Me(), send, Bytes(a.recv)));
          if (send != recv && Bytes(a.recv) > 0) std::memcpy(recv, send, Bytes(a.recv));
        } else {
          DIST_RETURN_IF_ERROR(Fetch(k, a.root, op, ctx, recv, Bytes(a.recv)));
        }
        break;
      case DIST_COLL_ALL_GATHER:
        DIST_RETURN_IF_ERROR(Publish(k + Me(), send, Bytes(a.send)));
        for (int32_t r = 0; r < world_; ++r) {
          DIST_RETURN_IF_ERROR(Fetch(k, r, op, ctx, recv + r * Bytes(a.send), Bytes(a.send)));
        }
        break;
      case DIST_COLL_BARRIER:
        DIST_RETURN_IF_ERROR(Publish(k + Me(), "", 0));
        for (int32_t r = 0; r < world_; ++r) {
          DIST_RETURN_IF_ERROR(Fetch(k, r, op, ctx, nullptr, 0));
        }
        break;
      case DIST_COLL_SEND:
        return Publish(absl::StrCat("p2p/", rank_, "/", a.peer, "/", a.tag, "/", op.seq), send,
                       Bytes(a.send));
      case DIST_COLL_RECV: {
        const std::string key = absl::StrCat("p2p/", a.peer, "/", rank_, "/", a.tag, "/", op.seq);
        DIST_RETURN_IF_ERROR(FetchKey(key, a.peer, op, ctx, recv, Bytes(a.recv)));
        store_.Remove(key).IgnoreError();
        return absl::OkStatus();
      }
      default:
        return absl::UnimplementedError("kvstore: not offered");  // the capabilities say so
    }
    return Done(k);
  }

 private:
  std::string Me() const { return absl::StrCat(rank_); }

  absl::Status Publish(const std::string& key, const char* data, size_t bytes) {
    return store_.Set(key, std::string(data, bytes));
  }

  // Rank `from`'s key under prefix `k` into `out`, exactly `bytes` long.
  absl::Status Fetch(const std::string& k, int32_t from, const dist::Op& op, dist::OpContext& ctx,
                     char* out, size_t bytes) {
    return FetchKey(k + absl::StrCat(from), from, op, ctx, out, bytes);
  }

  // Gets `key` in short slices, so that a revoke or the deadline is noticed
  // soon: nothing blocks forever.
  absl::Status FetchKey(const std::string& key, int32_t from, const dist::Op& op,
                        dist::OpContext& ctx, char* out, size_t bytes) {
    absl::StatusOr<std::string> value = absl::DeadlineExceededError("");
    while (absl::IsDeadlineExceeded(value.status())) {
      DIST_RETURN_IF_ERROR(ctx.Interrupted());
      const absl::Duration left = op.deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError(absl::StrCat(
            "kvstore: ", dist_collective_name(op.kind), ": data of rank ", from,
            " did not arrive within the timeout (store key ", key,
            "); check that every rank issues the same operations in the same order and that no "
            "rank died"));
      }
      value = store_.Get(key, std::clamp(left, absl::Milliseconds(1), absl::Milliseconds(100)));
    }
    if (!value.ok()) return value.status();
    if (value->size() != bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("kvstore: rank ", from, " contributed ", value->size(), " bytes where rank ",
                       rank_, " expects ", bytes, "; counts and dtypes must agree on every rank"));
    }
    if (bytes > 0) std::memcpy(out, value->data(), bytes);
    return absl::OkStatus();
  }

  // Every rank calls Done once per collective; the last one removes its keys.
  absl::Status Done(const std::string& k) {
    absl::StatusOr<int64_t> finished = store_.Add(k + "done", 1);
    if (!finished.ok() || *finished < world_) return finished.status();
    for (int32_t r = 0; r < world_; ++r) store_.Remove(k + absl::StrCat(r)).IgnoreError();
    store_.Remove(k + "done").IgnoreError();
    return absl::OkStatus();
  }

  const int32_t rank_;
  const int32_t world_;
  const dist::StoreView store_;  // borrowed until comm_destroy returns
};

class KvstoreBackend : public dist::Backend {
 public:
  const char* name() const override { return "kvstore"; }
  const char* version() const override { return "2.0.0"; }
  const char* LibraryVersion() override { return "kvstore 2.0 (the rendezvous store)"; }

  void Capabilities(dist_backend_capabilities_t& caps) override {
    caps.device_types = 1u << DIST_DEVICE_CPU;
    caps.dtypes = kDtypes;
    caps.collectives = kCollectives;
    caps.all_reduce_ops = dist::kAllReduceOps;
    caps.flags = DIST_CAP_THREAD_MULTIPLE | DIST_CAP_SHRINK;
    caps.notes = "moves every byte through the rendezvous store: a template, not for speed";
  }

  absl::StatusOr<std::unique_ptr<dist::BackendComm>> CreateComm(
      const dist_comm_config_t& config) override {
    if (config.store == nullptr) return absl::InvalidArgumentError("kvstore: needs a store");
    return dist::MakeRuntimeComm(config, std::make_unique<KvstoreTransport>(config));
  }

  // No comm_split: the core makes a subgroup with comm_create on its members.
  bool has_split() const override { return false; }
};

}  // namespace kvstore

// The one exported symbol, dist_backend_plugin_v1 (plugin.lds hides the rest).
DIST_EXPORT_BACKEND_PLUGIN(kvstore::KvstoreBackend)

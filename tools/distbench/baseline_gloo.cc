// Raw Gloo: a gloo::rendezvous::Context over its own dist store and Gloo's
// tcp transport, running Gloo's own algorithms on the same buffers.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/cpp/job_cpus.hpp"
#include "gloo/algorithm.h"
#include "gloo/allgather.h"
#include "gloo/allgather_ring.h"
#include "gloo/allreduce.h"
#include "gloo/allreduce_bcube.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/allreduce_ring.h"
#include "gloo/allreduce_ring_chunked.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/barrier_all_to_one.h"
#include "gloo/broadcast.h"
#include "gloo/broadcast_one_to_all.h"
#include "gloo/common/error.h"
#include "gloo/config.h"
#include "gloo/gather.h"
#include "gloo/math.h"
#include "gloo/reduce.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/scatter.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/types.h"
#include "plugins/backends/gloo/gloo_store.h"
#include "plugins/backends/gloo/pair_access.h"
#include "plugins/backends/gloo/sync_limit.h"
#include "tools/distbench/baseline.h"
#include "tools/distbench/baseline_store.h"

namespace distbench {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
void BitAnd(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<T*>(c)[i] =
        static_cast<T>(static_cast<const T*>(a)[i] & static_cast<const T*>(b)[i]);
  }
}
template <typename T>
void BitOr(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<T*>(c)[i] =
        static_cast<T>(static_cast<const T*>(a)[i] | static_cast<const T*>(b)[i]);
  }
}
template <typename T>
void BitXor(void* c, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    static_cast<T*>(c)[i] =
        static_cast<T>(static_cast<const T*>(a)[i] ^ static_cast<const T*>(b)[i]);
  }
}

// Gloo's reduction for (T, op), as torch's ProcessGroupGloo picks them: its
// own sum/product/min/max, and plain loops for the bitwise ops. AVG is a
// sum followed by a local division (Gloo has no average).
template <typename T>
ReduceFn ReduceFunction(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:
      return &gloo::sum<T>;
    case DIST_PRODUCT:
      return &gloo::product<T>;
    case DIST_MIN:
      return &gloo::min<T>;
    case DIST_MAX:
      return &gloo::max<T>;
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    if (op == DIST_BAND) return &BitAnd<T>;
    if (op == DIST_BOR) return &BitOr<T>;
    if (op == DIST_BXOR) return &BitXor<T>;
  }
  return nullptr;
}

// The same ops in the shape of Gloo's legacy algorithm classes: x = x op y.
template <typename T>
void BitAndInto(T* x, const T* y, size_t n) {
  BitAnd<T>(x, x, y, n);
}
template <typename T>
void BitOrInto(T* x, const T* y, size_t n) {
  BitOr<T>(x, x, y, n);
}
template <typename T>
void BitXorInto(T* x, const T* y, size_t n) {
  BitXor<T>(x, x, y, n);
}

template <typename T>
const gloo::ReductionFunction<T>* LegacyFunction(dist_reduce_op_t op) {
  switch (op) {
    case DIST_SUM:
    case DIST_AVG:
      return gloo::ReductionFunction<T>::sum;
    case DIST_PRODUCT:
      return gloo::ReductionFunction<T>::product;
    case DIST_MIN:
      return gloo::ReductionFunction<T>::min;
    case DIST_MAX:
      return gloo::ReductionFunction<T>::max;
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    static const gloo::ReductionFunction<T> band(gloo::CUSTOM, &BitAndInto<T>);
    static const gloo::ReductionFunction<T> bor(gloo::CUSTOM, &BitOrInto<T>);
    static const gloo::ReductionFunction<T> bxor(gloo::CUSTOM, &BitXorInto<T>);
    if (op == DIST_BAND) return &band;
    if (op == DIST_BOR) return &bor;
    if (op == DIST_BXOR) return &bxor;
  }
  return nullptr;
}

// Every way Gloo 0.5 offers for an operation, by name (no spaces: the table
// is split on blanks). The unbound-buffer entry points (gloo::allreduce,
// ...) come first; the legacy bound-buffer classes register their buffers
// when constructed, so they are built once per case and then run repeatedly,
// as their users do. Each legacy class runs again on synchronous pairs
// ("_sync": Gloo's Pair::setSync, the waiting thread reads the socket
// itself) where every message fits `sync_limit`: the limit the plugin
// agrees on for them, agreed the same way over the same send buffers
// (plugins/backends/gloo/sync_limit.h: larger synchronous writes can block
// each other).
constexpr char kSyncSuffix[] = "_sync";
// And again on synchronous pairs in Gloo's busy-polling mode ("_busypoll":
// the waiting thread polls the socket until the message comes instead of
// sleeping in read), where every rank has a CPU of its own: the fastest a
// Gloo user can wait there, as the plugin polls for a while before it
// sleeps (plugins/backends/gloo/peer_spin.h).
constexpr char kBusyPollSuffix[] = "_busypoll";

std::vector<std::string> VariantsOf(const Case& c, size_t sync_limit, bool busy_poll) {
  const int w = c.world_size;
  std::vector<std::string> names;
  size_t first_legacy = 0;
  switch (c.op->op) {
    case Op::kAllReduce:
      names = {"allreduce_ring", "allreduce_bcube", "AllreduceRing", "AllreduceRingChunked",
               "AllreduceHalvingDoubling"};
      first_legacy = 2;
      // The legacy bcube class assumes W is a power of its base (2) and at
      // least one element per rank.
      if ((w & (w - 1)) == 0 && c.block >= static_cast<uint64_t>(w)) {
        names.push_back("AllreduceBcube");
      }
      break;
    case Op::kBroadcast:
      names = {"broadcast", "BroadcastOneToAll"};
      first_legacy = 1;
      break;
    case Op::kAllGather:
      names = {"allgather", "AllgatherRing"};
      first_legacy = 1;
      break;
    case Op::kBarrier:
      names = {"barrier", "BarrierAllToAll", "BarrierAllToOne"};
      first_legacy = 1;
      break;
    default:
      return {"default"};
  }
  // The largest message one rank writes to one peer: the whole buffer (an
  // all_gather's: one rank's block).
  if (c.block * c.element_size() <= sync_limit) {
    const size_t legacy_end = names.size();
    for (size_t i = first_legacy; i < legacy_end; ++i) names.push_back(names[i] + kSyncSuffix);
    if (busy_poll) {
      for (size_t i = first_legacy; i < legacy_end; ++i) {
        names.push_back(names[i] + kBusyPollSuffix);
      }
    }
  }
  return names;
}

template <typename T>
void Divide(void* data, size_t n, int ranks) {
  T* values = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, gloo::float16>) {
      values[i] = gloo::cpu_float2half_rn(gloo::cpu_half2float(values[i]) / ranks);
    } else {
      values[i] = static_cast<T>(values[i] / ranks);
    }
  }
}

class GlooBaseline : public Baseline {
 public:
  // `busy_context` may be null (no "_busypoll" variants).
  GlooBaseline(std::shared_ptr<gloo::Context> context, std::shared_ptr<gloo::Context> sync_context,
               std::shared_ptr<gloo::Context> busy_context, size_t sync_limit, std::string address,
               int64_t timeout_ms)
      : context_(std::move(context)),
        sync_context_(std::move(sync_context)),
        busy_context_(std::move(busy_context)),
        sync_limit_(sync_limit),
        address_(std::move(address)),
        timeout_(timeout_ms) {}

  std::string name() const override { return "gloo"; }
  std::string description() const override {
    return absl::StrCat("Gloo ", GLOO_VERSION_MAJOR, ".", GLOO_VERSION_MINOR, ".",
                        GLOO_VERSION_PATCH, " (tcp transport on ", address_, ")");
  }

  absl::Status Supports(const Case& c) const override {
    if (c.op->op == Op::kBarrier) return absl::OkStatus();  // no data, no dtype
    if (c.dtype == DIST_BFLOAT16) {
      return absl::UnimplementedError("Gloo has no bfloat16");
    }
    if (c.op->reduces) {
      bool ok = false;
      absl::Status known = Dispatch(c.dtype, [&](auto tag) {
        ok = ReduceFunction<decltype(tag)>(c.redop) != nullptr;
        return absl::OkStatus();
      });
      if (!known.ok()) return known;
      if (!ok) {
        return absl::UnimplementedError(absl::StrCat("Gloo cannot ", dist_reduce_op_name(c.redop),
                                                     " ", dist_dtype_name(c.dtype)));
      }
    }
    if (c.op->op == Op::kSendRecv && c.world_size < 2) {
      return absl::UnimplementedError("sendrecv needs 2 or more ranks");
    }
    return absl::OkStatus();
  }

  absl::Status Run(const Case& c, void* send, void* recv) override {
    try {
      return Dispatch(c.dtype, [&](auto tag) { return RunTyped<decltype(tag)>(c, send, recv); });
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("raw Gloo ", c.op->name, ": ", e.what()));
    }
  }

  std::vector<std::string> Variants(const Case& c) const override {
    return VariantsOf(c, sync_limit_, busy_context_ != nullptr);
  }

  absl::Status RunVariant(const Case& c, int variant, void* send, void* recv) override {
    if (variant == 0) return Run(c, send, recv);
    if (c.op->op == Op::kAllReduce && variant == 1) {
      bcube_ = true;
      absl::Status status = Run(c, send, recv);
      bcube_ = false;
      return status;
    }
    try {
      if (c.op->op == Op::kBarrier) return RunLegacy<char>(c, variant, send, recv);
      return Dispatch(c.dtype,
                      [&](auto tag) { return RunLegacy<decltype(tag)>(c, variant, send, recv); });
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("raw Gloo ", VariantsOf(c, sync_limit_, busy_context_ != nullptr)[variant],
                       ": ", e.what()));
    }
  }

  absl::Status Barrier() override {
    try {
      gloo::BarrierOptions opts(context_);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("raw Gloo barrier: ", e.what()));
    }
  }

 private:
  template <typename Fn>
  static absl::Status Dispatch(dist_dtype_t dtype, Fn&& fn) {
    switch (dtype) {
      case DIST_INT8:
        return fn(int8_t{});
      case DIST_UINT8:
        return fn(uint8_t{});
      case DIST_INT32:
        return fn(int32_t{});
      case DIST_INT64:
        return fn(int64_t{});
      case DIST_FLOAT16:
        return fn(gloo::float16{});
      case DIST_FLOAT32:
        return fn(float{});
      case DIST_FLOAT64:
        return fn(double{});
      default:
        return absl::UnimplementedError(absl::StrCat("Gloo has no ", dist_dtype_name(dtype)));
    }
  }

  // A legacy algorithm instance stays built while the case and buffers stay
  // the same (its constructor registers the buffers with every peer).
  struct LegacyKey {
    Op op;
    int variant;
    dist_dtype_t dtype;
    dist_reduce_op_t redop;
    int root;
    uint64_t block;
    void* send;
    void* recv;
    bool operator==(const LegacyKey& o) const {
      return op == o.op && variant == o.variant && dtype == o.dtype && redop == o.redop &&
             root == o.root && block == o.block && send == o.send && recv == o.recv;
    }
  };

  template <typename T>
  absl::Status RunLegacy(const Case& c, int variant, void* send_raw, void* recv_raw) {
    T* send = static_cast<T*>(send_raw);
    T* recv = static_cast<T*>(recv_raw);
    const int n = static_cast<int>(c.block);
    const LegacyKey key{c.op->op, variant, c.dtype, c.redop, c.root, c.block, send_raw, recv_raw};
    std::unique_ptr<gloo::Algorithm>* slot = nullptr;
    for (auto& [k, algorithm] : legacy_) {
      if (k == key) slot = &algorithm;
    }
    if (slot == nullptr) {
      // A new case: drop the previous case's instances (same order on every
      // rank, so the context's slots stay in step).
      if (!legacy_.empty() &&
          !(legacy_.front().first.op == key.op && legacy_.front().first.block == key.block &&
            legacy_.front().first.send == key.send && legacy_.front().first.recv == key.recv &&
            legacy_.front().first.dtype == key.dtype)) {
        legacy_.clear();
      }
      legacy_.emplace_back(key, MakeLegacy<T>(c, variant, send, recv, n));
      slot = &legacy_.back().second;
    }
    switch (c.op->op) {
      case Op::kAllReduce:
        // The classes reduce in place; out of place is a copy first.
        if (send != recv) std::memcpy(static_cast<void*>(recv), send, c.block * sizeof(T));
        (*slot)->run();
        if (c.redop == DIST_AVG) Divide<T>(recv, c.block, c.world_size);
        break;
      case Op::kBroadcast:
        if (c.rank == c.root && send != recv) {
          std::memcpy(static_cast<void*>(recv), send, c.block * sizeof(T));
        }
        (*slot)->run();
        break;
      default:
        (*slot)->run();
        break;
    }
    return absl::OkStatus();
  }

  template <typename T>
  std::unique_ptr<gloo::Algorithm> MakeLegacy(const Case& c, int variant, T* send, T* recv, int n) {
    const std::vector<T*> ptrs = {recv};
    std::string name = VariantsOf(c, sync_limit_, busy_context_ != nullptr)[variant];
    const bool sync = absl::EndsWith(name, kSyncSuffix);
    const bool busy = absl::EndsWith(name, kBusyPollSuffix);
    if (sync) name.resize(name.size() - std::strlen(kSyncSuffix));
    if (busy) name.resize(name.size() - std::strlen(kBusyPollSuffix));
    const std::shared_ptr<gloo::Context>& context =
        busy ? busy_context_ : (sync ? sync_context_ : context_);
    const gloo::ReductionFunction<T>* fn = LegacyFunction<T>(c.redop);
    if (name == "AllreduceRing") {
      return std::make_unique<gloo::AllreduceRing<T>>(context, ptrs, n, fn);
    }
    if (name == "AllreduceRingChunked") {
      return std::make_unique<gloo::AllreduceRingChunked<T>>(context, ptrs, n, fn);
    }
    if (name == "AllreduceHalvingDoubling") {
      return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, ptrs, n, fn);
    }
    if (name == "AllreduceBcube") {
      return std::make_unique<gloo::AllreduceBcube<T>>(context, ptrs, n, fn);
    }
    if (name == "BroadcastOneToAll") {
      return std::make_unique<gloo::BroadcastOneToAll<T>>(context, ptrs, n, c.root);
    }
    if (name == "AllgatherRing") {
      const std::vector<const T*> in = {send};
      return std::make_unique<gloo::AllgatherRing<T>>(context, in, recv, n);
    }
    if (name == "BarrierAllToAll") return std::make_unique<gloo::BarrierAllToAll>(context);
    if (name == "BarrierAllToOne") return std::make_unique<gloo::BarrierAllToOne>(context, 0);
    throw std::runtime_error("no legacy Gloo algorithm named " + name);
  }

  template <typename T>
  absl::Status RunTyped(const Case& c, void* send_raw, void* recv_raw) {
    T* send = static_cast<T*>(send_raw);
    T* recv = static_cast<T*>(recv_raw);
    const size_t n = c.block;
    const int w = c.world_size;
    switch (c.op->op) {
      case Op::kAllReduce: {
        gloo::AllreduceOptions opts(context_);
        opts.setInput(send, n);
        opts.setOutput(recv, n);
        opts.setReduceFunction(ReduceFunction<T>(c.redop));
        opts.setTimeout(timeout_);
        opts.setAlgorithm(bcube_ ? gloo::AllreduceOptions::Algorithm::BCUBE
                                 : gloo::AllreduceOptions::Algorithm::RING);
        gloo::allreduce(opts);
        if (c.redop == DIST_AVG) Divide<T>(recv, n, w);
        break;
      }
      case Op::kReduceScatter: {
        // Gloo has no reduce-scatter for unbound buffers; torch's Gloo group
        // all-reduces and keeps its block, and so do we.
        if (scratch_.size() < n * w * sizeof(T)) scratch_.resize(n * w * sizeof(T));
        T* all = reinterpret_cast<T*>(scratch_.data());
        gloo::AllreduceOptions opts(context_);
        opts.setInput(send, n * w);
        opts.setOutput(all, n * w);
        opts.setReduceFunction(ReduceFunction<T>(c.redop));
        opts.setTimeout(timeout_);
        gloo::allreduce(opts);
        std::memcpy(static_cast<void*>(recv), all + c.rank * n, n * sizeof(T));
        if (c.redop == DIST_AVG) Divide<T>(recv, n, w);
        break;
      }
      case Op::kBroadcast: {
        gloo::BroadcastOptions opts(context_);
        if (c.rank == c.root) opts.setInput(send, n);
        opts.setOutput(recv, n);
        opts.setRoot(c.root);
        opts.setTimeout(timeout_);
        gloo::broadcast(opts);
        break;
      }
      case Op::kReduce: {
        gloo::ReduceOptions opts(context_);
        opts.setInput(send, n);
        opts.setOutput(recv, n);
        opts.setRoot(c.root);
        opts.setReduceFunction(ReduceFunction<T>(c.redop));
        opts.setTimeout(timeout_);
        gloo::reduce(opts);
        if (c.redop == DIST_AVG && c.rank == c.root) Divide<T>(recv, n, w);
        break;
      }
      case Op::kAllGather: {
        gloo::AllgatherOptions opts(context_);
        opts.setInput(send, n);
        opts.setOutput(recv, n * w);
        opts.setTimeout(timeout_);
        gloo::allgather(opts);
        break;
      }
      case Op::kGather: {
        gloo::GatherOptions opts(context_);
        opts.setInput(send, n);
        if (c.rank == c.root) opts.setOutput(recv, n * w);
        opts.setRoot(c.root);
        opts.setTimeout(timeout_);
        gloo::gather(opts);
        break;
      }
      case Op::kScatter: {
        gloo::ScatterOptions opts(context_);
        if (c.rank == c.root) {
          std::vector<T*> blocks(w);
          for (int j = 0; j < w; ++j) blocks[j] = send + j * n;
          opts.setInputs(blocks, n);
        }
        opts.setOutput(recv, n);
        opts.setRoot(c.root);
        opts.setTimeout(timeout_);
        gloo::scatter(opts);
        break;
      }
      case Op::kAllToAll: {
        gloo::AlltoallOptions opts(context_);
        opts.setInput(send, n * w);
        opts.setOutput(recv, n * w);
        opts.setTimeout(timeout_);
        gloo::alltoall(opts);
        break;
      }
      case Op::kBarrier:
        return Barrier();
      case Op::kSendRecv: {
        const int next = (c.rank + 1) % w;
        const int prev = (c.rank + w - 1) % w;
        auto out = context_->createUnboundBuffer(send, n * sizeof(T));
        auto in = context_->createUnboundBuffer(recv, n * sizeof(T));
        constexpr uint64_t kSlot = 0x64697374;  // "dist"
        in->recv(prev, kSlot);
        out->send(next, kSlot);
        if (!in->waitRecv(timeout_) || !out->waitSend(timeout_)) {
          return absl::DeadlineExceededError("raw Gloo sendrecv timed out");
        }
        break;
      }
    }
    return absl::OkStatus();
  }

  std::shared_ptr<gloo::Context> context_;
  std::shared_ptr<gloo::Context> sync_context_;  // the same ranks on synchronous pairs
  std::shared_ptr<gloo::Context> busy_context_;  // and on busy-polling ones, or null
  size_t sync_limit_;                            // the largest message on them
  std::string address_;
  std::chrono::milliseconds timeout_;
  std::vector<char> scratch_;
  std::vector<std::pair<LegacyKey, std::unique_ptr<gloo::Algorithm>>> legacy_;
  bool bcube_ = false;  // gloo::allreduce's bcube instead of its ring
};

}  // namespace

absl::StatusOr<std::unique_ptr<Baseline>> MakeGlooBaseline(const BaselineSetup& setup) {
  if (setup.device.type != DIST_DEVICE_CPU) {
    return absl::UnimplementedError("the Gloo baseline runs on --device=cpu only");
  }
  absl::StatusOr<std::unique_ptr<OwnedStore>> store = MakeBaselineStore(setup);
  if (!store.ok()) return store.status();
  // The same choice of interface as the gloo plugin makes (device.cc), so
  // both sides use the same network path.
  gloo::transport::tcp::attr attr;
  std::string address;
  const char* ifname = std::getenv("DIST_GLOO_IFNAME");
  const char* hostname = std::getenv("DIST_GLOO_HOSTNAME");
  if (ifname != nullptr && *ifname != '\0') {
    attr.iface = ifname;
    address = absl::StrCat("interface ", ifname);
  } else {
    if (hostname != nullptr && *hostname != '\0') {
      attr.hostname = hostname;
    } else if (setup.local_world_size > 0 && setup.local_world_size == setup.world_size) {
      attr.hostname = "127.0.0.1";  // every rank on this host
    } else {
      char host[256] = {0};
      if (gethostname(host, sizeof(host) - 1) == 0) attr.hostname = host;
      if (attr.hostname.empty()) attr.hostname = "127.0.0.1";
    }
    address = attr.hostname;
  }
  try {
    auto device = gloo::transport::tcp::CreateDevice(attr);
    // A context of the same ranks under `prefix` in the store; `sync`: its
    // pairs in Gloo's synchronous mode, polling the socket if `busy_poll`.
    auto connect = [&](const char* prefix, bool sync, bool busy_poll) {
      auto made = std::make_shared<gloo::rendezvous::Context>(setup.rank, setup.world_size);
      made->setTimeout(std::chrono::milliseconds(setup.timeout_ms));
      dist_gloo::GlooStore adapter((*store)->get(), absl::Milliseconds(setup.timeout_ms), prefix);
      made->connectFullMesh(adapter, device);
      for (int peer = 0; sync && peer < setup.world_size; ++peer) {
        if (peer != setup.rank) made->getPair(peer)->setSync(true, busy_poll);
      }
      return made;
    };
    auto context = connect("distbench/gloo/", false, false);
    // The legacy classes' "_sync" variants run on a second context: a
    // synchronous pair is no longer read by the device's loop thread, which
    // the unbound-buffer entry points need.
    auto sync_context = connect("distbench/gloo_sync/", true, false);
    const size_t sync_limit =
        dist_gloo::AgreeSyncMessageLimit(sync_context, dist_gloo::kPairSendBufferBytes);
    // Busy-polling pairs only where each rank has a CPU of its own (all
    // ranks counted as on this host; the plugin's rule, dist/cpp/job_cpus.hpp):
    // elsewhere a polling rank starves the one it waits for, and no user
    // would choose them.
    std::shared_ptr<gloo::Context> busy_context;
    if (setup.world_size <= dist::JobCpus()) {
      auto busy = connect("distbench/gloo_busypoll/", true, true);
      dist_gloo::EnlargeSendBuffers(*busy, dist_gloo::kPairSendBufferBytes);
      busy_context = std::move(busy);
    }
    auto baseline = std::make_unique<GlooBaseline>(context, sync_context, busy_context, sync_limit,
                                                   address, setup.timeout_ms);
    // Everyone is connected: after this nobody reads the store again, so
    // rank 0 may close it.
    absl::Status status = baseline->Barrier();
    if (!status.ok()) return status;
    return std::unique_ptr<Baseline>(std::move(baseline));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("raw Gloo context: ", e.what()));
  }
}

}  // namespace distbench

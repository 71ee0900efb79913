// all_reduce, reduce and reduce_scatter. float16/bfloat16 are widened to
// float32, reduced by Gloo as float32 and narrowed once at the end (one
// rounding, not one per rank); avg is a sum divided once at the end;
// bitwise ops run the SDK's integer kernels inside Gloo's algorithms.
#include <cstring>
#include <vector>

#include "dist/cpp/reduce.hpp"
#include "gloo/allreduce.h"
#include "gloo/common/error.h"
#include "gloo/reduce.h"
#include "plugins/backends/gloo/buffers.h"
#include "plugins/backends/gloo/op.h"
#include "plugins/backends/gloo/reduction.h"

namespace dist_gloo {
namespace {

// The legacy classes count elements in an int.
constexpr size_t kMaxBoundCount = (size_t{1} << 31) - 1;

// Gloo allreduce of n elements; in == nullptr means in place on out.
void GlooAllReduce(const OpEnv& env, const void* in, void* out, size_t n, dist_dtype_t dtype,
                   dist_reduce_op_t op) {
  gloo::AllreduceOptions opts(env.context);
  WithElementType(dist_dtype_size(dtype), [&](auto type) {
    using T = decltype(type);
    if (in != nullptr && in != out) opts.setInput<T>(static_cast<T*>(const_cast<void*>(in)), n);
    opts.setOutput<T>(static_cast<T*>(out), n);
  });
  opts.setReduceFunction(ReductionFor(dtype, op));
  opts.setAlgorithm(env.algorithms->ForUnbound(Bytes(dtype, n), env.context->size) ==
                            AllReduceAlgorithm::kGlooBcube
                        ? gloo::AllreduceOptions::Algorithm::BCUBE
                        : gloo::AllreduceOptions::Algorithm::RING);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::allreduce(opts);
}

// Gloo reduce to `root`; out is full size on every rank (scratch off root).
void GlooReduce(const OpEnv& env, const void* in, void* out, size_t n, dist_dtype_t dtype,
                dist_reduce_op_t op, int root) {
  gloo::ReduceOptions opts(env.context);
  WithElementType(dist_dtype_size(dtype), [&](auto type) {
    using T = decltype(type);
    if (in != nullptr && in != out) opts.setInput<T>(static_cast<T*>(const_cast<void*>(in)), n);
    opts.setOutput<T>(static_cast<T*>(out), n);
  });
  opts.setReduceFunction(ReductionFor(dtype, op));
  opts.setRoot(root);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::reduce(opts);
}

// All-reduce of `n` elements from `send` into `recv` (any aliasing).
void AllReduceInto(const OpEnv& env, const void* send, void* recv, size_t n, dist_dtype_t dtype,
                   dist_reduce_op_t op) {
  const int size = env.context->size;
  if (IsHalf(dtype)) {
    std::vector<float> acc(n);
    dist::WidenToFloat(dtype, send, acc.data(), n);
    GlooAllReduce(env, nullptr, acc.data(), n, DIST_FLOAT32, op);
    if (op == DIST_AVG) dist::FinishAverage(DIST_FLOAT32, acc.data(), n, size);
    dist::NarrowFromFloat(dtype, acc.data(), recv, n);
    return;
  }
  GlooAllReduce(env, send, recv, n, dtype, op);
  if (op == DIST_AVG) dist::FinishAverage(dtype, recv, n, size);
}

}  // namespace

absl::Status RunAllReduce(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t n = a.send.count;
  // Reduced bytes: float16/bfloat16 travel as float32.
  const size_t bytes = Bytes(IsHalf(a.send.dtype) ? DIST_FLOAT32 : a.send.dtype, n);
  const AllReduceAlgorithm algorithm = env.algorithms->ForAllReduce(bytes, n, env.context->size);
  if (algorithm == AllReduceAlgorithm::kRingPipelined) {
    if (env.bound != nullptr &&
        env.bound->RingAllReduce(env.tag, a.send.data, a.recv.data, n, a.send.dtype, a.op)) {
      return absl::OkStatus();
    }
  } else if (env.bound != nullptr && IsBound(algorithm) && n <= kMaxBoundCount) {
    env.bound->AllReduce(algorithm, env.tag, a.send.data, a.recv.data, n, a.send.dtype, a.op);
    return absl::OkStatus();
  }
  AllReduceInto(env, a.send.data, a.recv.data, a.send.count, a.send.dtype, a.op);
  return absl::OkStatus();
}

absl::Status RunReduce(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t n = a.send.count;
  const dist_dtype_t dtype = a.send.dtype;
  const bool root = env.context->rank == a.root;
  const int size = env.context->size;
  if (IsHalf(dtype)) {
    std::vector<float> acc(n);
    dist::WidenToFloat(dtype, a.send.data, acc.data(), n);
    GlooReduce(env, nullptr, acc.data(), n, DIST_FLOAT32, a.op, a.root);
    if (root) {
      if (a.op == DIST_AVG) dist::FinishAverage(DIST_FLOAT32, acc.data(), n, size);
      dist::NarrowFromFloat(dtype, acc.data(), a.recv.data, n);
    }
    return absl::OkStatus();
  }
  const size_t bytes = Bytes(dtype, n);
  const void* in = a.send.data;
  std::vector<char> scratch;
  void* out;
  if (root) {
    out = a.recv.data;
  } else {
    // Gloo's ring reduce needs a full-size output on every rank; the
    // caller's recv is unused off the root, so it is left alone.
    scratch.resize(bytes);
    out = scratch.data();
  }
  GlooReduce(env, in, out, n, dtype, a.op, a.root);
  if (root && a.op == DIST_AVG) dist::FinishAverage(dtype, out, n, size);
  return absl::OkStatus();
}

namespace {

// Ring reduce-scatter on Gloo unbound buffers (Gloo 0.5 has none): W-1
// steps; in step s rank r sends its partial block (r-s-1) to rank r+1 and
// reduces block (r-s-2) from rank r-1 into its own, so that it ends with
// the full reduction of block r. Each rank sends (W-1)/W of the input, half
// of what an all_reduce would. `acc` holds the whole input and is reduced
// in place; block r of it is the result.
constexpr uint64_t kReduceScatterSlotPrefix = uint64_t{0xd2} << 56;

void RingReduceScatter(const OpEnv& env, void* acc, size_t n, dist_dtype_t dtype,
                       dist_reduce_op_t op) {
  const int w = env.context->size;
  const int r = env.context->rank;
  if (w == 1) return;
  const size_t block = Bytes(dtype, n);
  const ReduceFn reduce = ReductionFor(dtype, op);
  std::vector<char> incoming(block);
  auto acc_buffer = env.context->createUnboundBuffer(acc, block * w);
  auto in_buffer = env.context->createUnboundBuffer(incoming.data(), block);
  const uint64_t slot = kReduceScatterSlotPrefix | env.tag;
  const int next = (r + 1) % w;
  const int prev = (r + w - 1) % w;
  for (int step = 0; step < w - 1; ++step) {
    const int send_block = ((r - step - 1) % w + w) % w;
    const int recv_block = ((r - step - 2) % w + w) % w;
    in_buffer->recv(prev, slot, 0, block);
    acc_buffer->send(next, slot, block * send_block, block);
    if (!in_buffer->waitRecv(env.timeout))
      throw gloo::IoException("reduce_scatter: receive aborted");
    char* target = At(acc, block * recv_block);
    reduce(target, target, incoming.data(), n);
    if (!acc_buffer->waitSend(env.timeout)) throw gloo::IoException("reduce_scatter: send aborted");
  }
}

}  // namespace

absl::Status RunReduceScatter(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t n = a.recv.count;
  const int size = env.context->size;
  const size_t w = static_cast<size_t>(size);
  const size_t rank = static_cast<size_t>(env.context->rank);
  const dist_dtype_t dtype = a.send.dtype;
  if (IsHalf(dtype)) {
    std::vector<float> acc(n * w);
    dist::WidenToFloat(dtype, a.send.data, acc.data(), n * w);
    RingReduceScatter(env, acc.data(), n, DIST_FLOAT32, a.op);
    float* mine = acc.data() + n * rank;
    if (a.op == DIST_AVG) dist::FinishAverage(DIST_FLOAT32, mine, n, size);
    dist::NarrowFromFloat(dtype, mine, a.recv.data, n);
    return absl::OkStatus();
  }
  // Reduce in a private copy of the input: the caller's send stays intact
  // and recv may alias it in any way.
  std::vector<char> acc = CopyOf(a.send.data, Bytes(dtype, n * w));
  RingReduceScatter(env, acc.data(), n, dtype, a.op);
  char* mine = acc.data() + Bytes(dtype, n * rank);
  if (a.op == DIST_AVG) dist::FinishAverage(dtype, mine, n, size);
  std::memcpy(a.recv.data, mine, Bytes(dtype, n));
  return absl::OkStatus();
}

}  // namespace dist_gloo

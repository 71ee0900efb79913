// The collectives that move data without reducing it, and barrier. Gloo
// sees them as bytes, so every dtype works unchanged.
#include <cstring>
#include <vector>

#include "gloo/allgather.h"
#include "gloo/alltoall.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/gather.h"
#include "gloo/scatter.h"
#include "plugins/backends/gloo/buffers.h"
#include "plugins/backends/gloo/op.h"

namespace dist_gloo {

absl::Status RunBroadcast(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t bytes = Bytes(a.recv.dtype, a.recv.count);
  if (env.bound != nullptr && env.algorithms->RingBroadcast(bytes) &&
      env.bound->RingBroadcast(env.tag, a.send.data, a.recv.data, bytes, a.root)) {
    return absl::OkStatus();
  }
  if (env.bound != nullptr && env.algorithms->BoundBroadcast(bytes, env.context->size)) {
    env.bound->Broadcast(env.tag, a.send.data, a.recv.data, bytes, a.root);
    return absl::OkStatus();
  }
  gloo::BroadcastOptions opts(env.context);
  // On the root Gloo sends from the input and copies it to the output;
  // without an input (in place) it sends from the output. Buffers that
  // overlap otherwise never get here (dist/cpp/validate.hpp, CheckOverlap).
  if (env.context->rank == a.root && a.send.data != a.recv.data) {
    opts.setInput<char>(static_cast<char*>(a.send.data), bytes);
  }
  opts.setOutput<char>(static_cast<char*>(a.recv.data), bytes);
  opts.setRoot(a.root);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::broadcast(opts);
  return absl::OkStatus();
}

absl::Status RunAllGather(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t block = Bytes(a.send.dtype, a.send.count);
  const size_t w = static_cast<size_t>(env.context->size);
  char* out = static_cast<char*>(a.recv.data);
  char* mine = out + block * env.context->rank;
  if (env.bound != nullptr && env.algorithms->RingAllGather(block * w) &&
      env.bound->RingAllGather(env.tag, a.send.data, out, block)) {
    return absl::OkStatus();
  }
  if (env.bound != nullptr && env.algorithms->BoundAllGather(block * w, env.context->size)) {
    env.bound->AllGather(env.tag, a.send.data, out, block);
    return absl::OkStatus();
  }
  gloo::AllgatherOptions opts(env.context);
  // In place (NCCL's convention): the input already sits in this rank's
  // block, which Gloo then uses as is.
  if (a.send.data != mine) opts.setInput<char>(static_cast<char*>(a.send.data), block);
  opts.setOutput<char>(out, block * w);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::allgather(opts);
  return absl::OkStatus();
}

absl::Status RunGather(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t block = Bytes(a.send.dtype, a.send.count);
  const size_t w = static_cast<size_t>(env.context->size);
  const bool root = env.context->rank == a.root;
  gloo::GatherOptions opts(env.context);
  opts.setInput<char>(static_cast<char*>(a.send.data), block);
  if (root) opts.setOutput<char>(static_cast<char*>(a.recv.data), block * w);
  opts.setRoot(a.root);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::gather(opts);
  return absl::OkStatus();
}

absl::Status RunScatter(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t block = Bytes(a.recv.dtype, a.recv.count);
  const size_t w = static_cast<size_t>(env.context->size);
  const bool root = env.context->rank == a.root;
  gloo::ScatterOptions opts(env.context);
  if (root) {
    char* in = static_cast<char*>(a.send.data);
    std::vector<char*> blocks(w);
    for (size_t i = 0; i < w; ++i) blocks[i] = in + block * i;
    opts.setInputs<char>(blocks, block);
  }
  opts.setOutput<char>(static_cast<char*>(a.recv.data), block);
  opts.setRoot(a.root);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::scatter(opts);
  return absl::OkStatus();
}

absl::Status RunAllToAll(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const size_t bytes = Bytes(a.send.dtype, a.send.count);
  gloo::AlltoallOptions opts(env.context);
  opts.setInput<char>(static_cast<char*>(a.send.data), bytes);
  opts.setOutput<char>(static_cast<char*>(a.recv.data), bytes);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::alltoall(opts);
  return absl::OkStatus();
}

absl::Status RunBarrier(const Op& op, const OpEnv& env) {
  if (env.bound != nullptr && env.algorithms->BoundBarrier(env.context->size)) {
    env.bound->Barrier(env.tag, env.algorithms->BarrierAllToAll(env.context->size));
    return absl::OkStatus();
  }
  gloo::BarrierOptions opts(env.context);
  opts.setTag(env.tag);
  opts.setTimeout(env.timeout);
  gloo::barrier(opts);
  return absl::OkStatus();
}

}  // namespace dist_gloo

#include "process_group_dist.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "torch_store.h"

namespace dist_torch {
namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

std::string Describe(const char* op, dist_error_t* error) {
  std::string text = std::string("dist ") + op +
                     " failed: " + dist_error_code_name(dist_error_code(error)) + ": " +
                     dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

void Check(const char* op, dist_error_t* error) {
  if (error != nullptr) TORCH_CHECK(false, Describe(op, error));
}

dist_dtype_t DtypeOf(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kChar:
      return DIST_INT8;
    case at::kByte:
      return DIST_UINT8;
    case at::kBool:
      return DIST_UINT8;  // torch's bools are one byte of 0 or 1
    case at::kInt:
      return DIST_INT32;
    case at::kLong:
      return DIST_INT64;
    case at::kHalf:
      return DIST_FLOAT16;
    case at::kBFloat16:
      return DIST_BFLOAT16;
    case at::kFloat:
      return DIST_FLOAT32;
    case at::kDouble:
      return DIST_FLOAT64;
    default:
      TORCH_CHECK(false, "dist: tensors of ", t.scalar_type(),
                  " have no dist dtype; dist takes int8, uint8, bool, int32, int64, float16, "
                  "bfloat16, float32 and float64");
  }
}

dist_buffer_t BufferOf(const at::Tensor& t) {
  TORCH_CHECK(t.is_contiguous(), "dist: tensors must be contiguous (call .contiguous() first)");
  TORCH_CHECK(t.is_cpu() || t.is_cuda(), "dist: tensors on ", t.device(),
              " are not supported; use CPU tensors, or CUDA tensors with a cuda backend");
  const dist_device_t device = t.is_cuda() ? dist_cuda(t.device().index()) : dist_cpu();
  return dist_make_buffer(t.data_ptr(), static_cast<uint64_t>(t.numel()), DtypeOf(t), device);
}

dist_reduce_op_t OpOf(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return DIST_SUM;
    case c10d::ReduceOp::AVG:
      return DIST_AVG;
    case c10d::ReduceOp::PRODUCT:
      return DIST_PRODUCT;
    case c10d::ReduceOp::MIN:
      return DIST_MIN;
    case c10d::ReduceOp::MAX:
      return DIST_MAX;
    case c10d::ReduceOp::BAND:
      return DIST_BAND;
    case c10d::ReduceOp::BOR:
      return DIST_BOR;
    case c10d::ReduceOp::BXOR:
      return DIST_BXOR;
    default:
      TORCH_CHECK(false, "dist: reduce op ", int(op.op_),
                  " is not supported (PREMUL_SUM is NCCL's own)");
  }
}

at::Tensor& Single(std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "dist ", op, ": takes one tensor per process, got ",
              tensors.size());
  return tensors[0];
}

// One contiguous tensor holding `parts` back to back.
at::Tensor Flatten(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  flat.reserve(parts.size());
  for (const at::Tensor& part : parts) flat.push_back(part.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive slices of `flat` into `parts`.
void Unflatten(const at::Tensor& flat, std::vector<at::Tensor>& parts, int64_t offset = 0) {
  for (at::Tensor& part : parts) {
    part.copy_(flat.narrow(0, offset, part.numel()).view_as(part));
    offset += part.numel();
  }
}

void CheckSameShape(const std::vector<at::Tensor>& tensors, const at::Tensor& like,
                    const char* op) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "dist ", op,
                ": every tensor of the list must have ", like.numel(), " elements of ",
                like.scalar_type());
  }
}

}  // namespace

DistWork::DistWork(int rank, OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void DistWork::Complete(std::exception_ptr error) {
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

ProcessGroupDist::ProcessGroupDist(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size) {
  dist_init_options_t options = dist_init_options_default();
  options.rank = rank;
  options.world_size = size;
  options.timeout_ms = timeout.count();
  options.group_name = "torch";
  options.store = NewTorchStore(store);  // dist's from here on, also on failure
  Check("init", dist_init(&options, &group_));
  completer_ = std::thread([this] { Run(); });
}

ProcessGroupDist::~ProcessGroupDist() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  if (completer_.joinable()) completer_.join();
  dist_destroy(group_);
}

std::string ProcessGroupDist::PluginName() const {
  const char* name = dist_backend_name(group_, DIST_DEVICE_CPU);
  return name != nullptr ? name : "";
}

void ProcessGroupDist::Run() {
  for (;;) {
    Pending pending;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything finished
      pending = std::move(queue_.front());
      queue_.pop_front();
    }
    // Bounded by the group's timeout: every dist operation fails by then.
    dist_error_t* error = dist_work_wait(pending.handle, -1);
    std::exception_ptr failure;
    if (error != nullptr) {
      failure = std::make_exception_ptr(std::runtime_error(
          Describe(c10d::opTypeToString(pending.work->retrieveOpType()).c_str(), error)));
    } else if (pending.after) {
      try {
        pending.after();
      } catch (...) {
        failure = std::current_exception();
      }
    }
    dist_work_destroy(pending.handle);
    pending.work->Complete(failure);
  }
}

WorkPtr ProcessGroupDist::Enqueue(OpType type, std::vector<at::Tensor> outputs,
                                  const std::function<dist_error_t*(dist_work_t**)>& issue,
                                  std::function<void()> after) {
  auto work = c10::make_intrusive<DistWork>(rank_, type, std::move(outputs));
  dist_work_t* handle = nullptr;
  Check(c10d::opTypeToString(type).c_str(), issue(&handle));
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Pending{handle, work, std::move(after)});
  }
  ready_.notify_one();
  return work;
}

WorkPtr ProcessGroupDist::Done(OpType type, std::vector<at::Tensor> outputs) {
  auto work = c10::make_intrusive<DistWork>(rank_, type, std::move(outputs));
  work->Complete(nullptr);
  return work;
}

// Every lambda below captures the tensors it reads or writes by value, so
// they live until the completer has finished the operation.

WorkPtr ProcessGroupDist::broadcast(std::vector<at::Tensor>& tensors,
                                    const c10d::BroadcastOptions& opts) {
  at::Tensor t = Single(tensors, "broadcast");
  const dist_buffer_t b = BufferOf(t);
  const int32_t root = static_cast<int32_t>(opts.rootRank);
  return Enqueue(
      OpType::BROADCAST, tensors,
      [&](dist_work_t** w) { return dist_broadcast(group_, &b, &b, root, w); }, [t] {});
}

WorkPtr ProcessGroupDist::allreduce(std::vector<at::Tensor>& tensors,
                                    const c10d::AllreduceOptions& opts) {
  at::Tensor t = Single(tensors, "allreduce");
  const dist_buffer_t b = BufferOf(t);
  const dist_reduce_op_t op = OpOf(opts.reduceOp);
  return Enqueue(
      OpType::ALLREDUCE, tensors,
      [&](dist_work_t** w) { return dist_all_reduce(group_, &b, &b, op, w); }, [t] {});
}

WorkPtr ProcessGroupDist::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "dist allreduce_coalesced: no tensors");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "dist allreduce_coalesced: every tensor must have the same dtype");
  }
  at::Tensor flat = Flatten(tensors);
  const dist_buffer_t b = BufferOf(flat);
  const dist_reduce_op_t op = OpOf(opts.reduceOp);
  std::vector<at::Tensor> outputs = tensors;
  return Enqueue(
      OpType::ALLREDUCE_COALESCED, tensors,
      [&](dist_work_t** w) { return dist_all_reduce(group_, &b, &b, op, w); },
      [flat, outputs]() mutable { Unflatten(flat, outputs); });
}

WorkPtr ProcessGroupDist::reduce(std::vector<at::Tensor>& tensors,
                                 const c10d::ReduceOptions& opts) {
  at::Tensor t = Single(tensors, "reduce");
  const dist_buffer_t b = BufferOf(t);
  const dist_reduce_op_t op = OpOf(opts.reduceOp);
  const int32_t root = static_cast<int32_t>(opts.rootRank);
  return Enqueue(
      OpType::REDUCE, tensors,
      [&](dist_work_t** w) { return dist_reduce(group_, &b, &b, op, root, w); }, [t] {});
}

WorkPtr ProcessGroupDist::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                    std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions&) {
  at::Tensor in = Single(inputs, "allgather").contiguous();
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "dist allgather: give one list of ", size_, " output tensors");
  CheckSameShape(outputs[0], in, "allgather");
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  const dist_buffer_t s = BufferOf(in), r = BufferOf(flat);
  std::vector<at::Tensor> out = outputs[0];
  return Enqueue(
      OpType::ALLGATHER, out, [&](dist_work_t** w) { return dist_all_gather(group_, &s, &r, w); },
      [in, flat, out]() mutable { Unflatten(flat, out); });
}

WorkPtr ProcessGroupDist::_allgather_base(at::Tensor& output, at::Tensor& input,
                                          const c10d::AllgatherOptions&) {
  TORCH_CHECK(output.numel() == input.numel() * size_, "dist _allgather_base: output has ",
              output.numel(), " elements, must have world size x input's (", input.numel() * size_,
              ")");
  const dist_buffer_t s = BufferOf(input), r = BufferOf(output);
  at::Tensor in = input, out = output;
  return Enqueue(
      OpType::_ALLGATHER_BASE, {output},
      [&](dist_work_t** w) { return dist_all_gather(group_, &s, &r, w); }, [in, out] {});
}

WorkPtr ProcessGroupDist::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs,
                                              const c10d::AllgatherOptions&) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_,
              "dist allgather_coalesced: give one output list per rank (", size_, ")");
  at::Tensor in = Flatten(inputs);
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  const dist_buffer_t s = BufferOf(in), r = BufferOf(flat);
  std::vector<std::vector<at::Tensor>> out = outputs;
  std::vector<at::Tensor> result;
  for (const auto& list : outputs) result.insert(result.end(), list.begin(), list.end());
  return Enqueue(
      OpType::ALLGATHER_COALESCED, result,
      [&](dist_work_t** w) { return dist_all_gather(group_, &s, &r, w); },
      [in, flat, out]() mutable {
        for (size_t rank = 0; rank < out.size(); ++rank) {
          Unflatten(flat, out[rank], static_cast<int64_t>(rank) * in.numel());
        }
      });
}

WorkPtr ProcessGroupDist::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                 std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  at::Tensor in = Single(inputs, "gather").contiguous();
  const int32_t root = static_cast<int32_t>(opts.rootRank);
  const dist_buffer_t s = BufferOf(in);
  if (rank_ != root) {
    return Enqueue(
        OpType::GATHER, {},
        [&](dist_work_t** w) { return dist_gather(group_, &s, nullptr, root, w); }, [in] {});
  }
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
              "dist gather: the root gives one list of ", size_, " output tensors");
  CheckSameShape(outputs[0], in, "gather");
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  const dist_buffer_t r = BufferOf(flat);
  std::vector<at::Tensor> out = outputs[0];
  return Enqueue(
      OpType::GATHER, out, [&](dist_work_t** w) { return dist_gather(group_, &s, &r, root, w); },
      [in, flat, out]() mutable { Unflatten(flat, out); });
}

WorkPtr ProcessGroupDist::scatter(std::vector<at::Tensor>& outputs,
                                  std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  at::Tensor out = Single(outputs, "scatter");
  const int32_t root = static_cast<int32_t>(opts.rootRank);
  const dist_buffer_t r = BufferOf(out);
  if (rank_ != root) {
    return Enqueue(
        OpType::SCATTER, outputs,
        [&](dist_work_t** w) { return dist_scatter(group_, nullptr, &r, root, w); }, [out] {});
  }
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "dist scatter: the root gives one list of ", size_, " input tensors");
  CheckSameShape(inputs[0], out, "scatter");
  at::Tensor flat = Flatten(inputs[0]);
  const dist_buffer_t s = BufferOf(flat);
  return Enqueue(
      OpType::SCATTER, outputs,
      [&](dist_work_t** w) { return dist_scatter(group_, &s, &r, root, w); }, [flat, out] {});
}

WorkPtr ProcessGroupDist::reduce_scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = Single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "dist reduce_scatter: give one list of ", size_, " input tensors");
  CheckSameShape(inputs[0], out, "reduce_scatter");
  at::Tensor flat = Flatten(inputs[0]);
  const dist_buffer_t s = BufferOf(flat), r = BufferOf(out);
  const dist_reduce_op_t op = OpOf(opts.reduceOp);
  return Enqueue(
      OpType::REDUCE_SCATTER, outputs,
      [&](dist_work_t** w) { return dist_reduce_scatter(group_, &s, &r, op, w); }, [flat, out] {});
}

WorkPtr ProcessGroupDist::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * size_, "dist _reduce_scatter_base: input has ",
              input.numel(), " elements, must have world size x output's (", output.numel() * size_,
              ")");
  const dist_buffer_t s = BufferOf(input), r = BufferOf(output);
  const dist_reduce_op_t op = OpOf(opts.reduceOp);
  at::Tensor in = input, out = output;
  return Enqueue(
      OpType::_REDUCE_SCATTER_BASE, {output},
      [&](dist_work_t** w) { return dist_reduce_scatter(group_, &s, &r, op, w); }, [in, out] {});
}

namespace {

// Element counts and offsets of `splits` (rows of `row` elements each), or
// of equal blocks when `splits` is empty.
void Layout(const std::vector<int64_t>& splits, int64_t total, int64_t row, int size,
            std::vector<uint64_t>* offsets, std::vector<uint64_t>* counts, const char* which) {
  TORCH_CHECK(splits.empty() || static_cast<int>(splits.size()) == size, "dist alltoall: the ",
              which, " split sizes list ", splits.size(), " entries for ", size, " ranks");
  offsets->assign(size, 0);
  counts->assign(size, 0);
  int64_t offset = 0;
  for (int r = 0; r < size; ++r) {
    const int64_t count = splits.empty() ? total / size : splits[r] * row;
    TORCH_CHECK(count >= 0, "dist alltoall: negative ", which, " split size for rank ", r);
    (*offsets)[r] = static_cast<uint64_t>(offset);
    (*counts)[r] = static_cast<uint64_t>(count);
    offset += count;
  }
  TORCH_CHECK(offset == total, "dist alltoall: the ", which, " split sizes cover ", offset,
              " elements, but the tensor has ", total);
}

}  // namespace

void ProcessGroupDist::AllToAllV(const at::Tensor& send, const std::vector<uint64_t>& send_offsets,
                                 const std::vector<uint64_t>& send_counts, const at::Tensor& recv,
                                 const std::vector<uint64_t>& recv_offsets,
                                 const std::vector<uint64_t>& recv_counts) {
  const dist_buffer_t s = BufferOf(send), r = BufferOf(recv);
  Check("alltoall", dist_all_to_all_v(group_, &s, send_counts.data(), send_offsets.data(), &r,
                                      recv_counts.data(), recv_offsets.data(), nullptr));
}

WorkPtr ProcessGroupDist::alltoall_base(at::Tensor& output, at::Tensor& input,
                                        std::vector<int64_t>& output_split_sizes,
                                        std::vector<int64_t>& input_split_sizes,
                                        const c10d::AllToAllOptions&) {
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    const dist_buffer_t s = BufferOf(input), r = BufferOf(output);
    at::Tensor in = input, out = output;
    return Enqueue(
        OpType::ALLTOALL_BASE, {output},
        [&](dist_work_t** w) { return dist_all_to_all(group_, &s, &r, w); }, [in, out] {});
  }
  const int64_t in_row = input.dim() > 0 && input.size(0) > 0 ? input.numel() / input.size(0) : 1;
  const int64_t out_row =
      output.dim() > 0 && output.size(0) > 0 ? output.numel() / output.size(0) : 1;
  std::vector<uint64_t> send_offsets, send_counts, recv_offsets, recv_counts;
  Layout(input_split_sizes, input.numel(), in_row, size_, &send_offsets, &send_counts, "input");
  Layout(output_split_sizes, output.numel(), out_row, size_, &recv_offsets, &recv_counts, "output");
  AllToAllV(input, send_offsets, send_counts, output, recv_offsets, recv_counts);
  return Done(OpType::ALLTOALL_BASE, {output});
}

WorkPtr ProcessGroupDist::alltoall(std::vector<at::Tensor>& outputs,
                                   std::vector<at::Tensor>& inputs, const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
              "dist alltoall: give ", size_, " input and ", size_, " output tensors");
  at::Tensor send = Flatten(inputs);
  std::vector<uint64_t> send_offsets, send_counts, recv_offsets, recv_counts;
  uint64_t offset = 0, recv_total = 0;
  bool even = true;
  for (int r = 0; r < size_; ++r) {
    send_offsets.push_back(offset);
    send_counts.push_back(inputs[r].numel());
    offset += inputs[r].numel();
    recv_offsets.push_back(recv_total);
    recv_counts.push_back(outputs[r].numel());
    recv_total += outputs[r].numel();
    even =
        even && inputs[r].numel() == inputs[0].numel() && outputs[r].numel() == inputs[0].numel();
  }
  at::Tensor recv = at::empty({static_cast<int64_t>(recv_total)}, send.options());
  std::vector<at::Tensor> out = outputs;
  if (even) {
    const dist_buffer_t s = BufferOf(send), r = BufferOf(recv);
    return Enqueue(
        OpType::ALLTOALL, out, [&](dist_work_t** w) { return dist_all_to_all(group_, &s, &r, w); },
        [send, recv, out]() mutable { Unflatten(recv, out); });
  }
  AllToAllV(send, send_offsets, send_counts, recv, recv_offsets, recv_counts);
  Unflatten(recv, out);
  return Done(OpType::ALLTOALL, out);
}

WorkPtr ProcessGroupDist::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  at::Tensor t = Single(tensors, "send");
  const dist_buffer_t b = BufferOf(t);
  return Enqueue(
      OpType::SEND, {}, [&](dist_work_t** w) { return dist_send(group_, &b, dst, tag, w); },
      [t] {});
}

WorkPtr ProcessGroupDist::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  at::Tensor t = Single(tensors, "recv");
  const dist_buffer_t b = BufferOf(t);
  return Enqueue(
      OpType::RECV, tensors, [&](dist_work_t** w) { return dist_recv(group_, &b, src, tag, w); },
      [t] {});
}

WorkPtr ProcessGroupDist::recvAnysource(std::vector<at::Tensor>&, int) {
  TORCH_CHECK(false,
              "dist recv: receiving from any source is not in dist's C API (no backend under it "
              "matches on the sender); pass src=");
}

WorkPtr ProcessGroupDist::barrier(const c10d::BarrierOptions&) {
  return Enqueue(OpType::BARRIER, {}, [&](dist_work_t** w) { return dist_barrier(group_, w); });
}

}  // namespace dist_torch

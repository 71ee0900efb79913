// torch.distributed's ProcessGroup on dist: every c10d operation that torch
// 1.13 calls for CPU tensors becomes a dist.h call on one dist group, which
// runs on whichever backend plugin DIST_BACKEND names. Operations complete
// in issue order (dist's rule), so one completer thread per group finishes
// torch's Work objects and futures in that order.
#ifndef DIST_TORCH_PROCESS_GROUP_DIST_H_
#define DIST_TORCH_PROCESS_GROUP_DIST_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "dist/dist.h"

namespace dist_torch {

// A torch Work finished by the group's completer (or at once, for the
// operations done on the caller's thread).
class DistWork : public c10d::Work {
 public:
  DistWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // Marks the work done (with an error when `error` is set) and completes
  // its future; Work::wait returns or rethrows.
  void Complete(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupDist : public c10d::ProcessGroup {
 public:
  // Collective over the group's ranks: they meet through `store` (torch's,
  // with the group's prefix). Throws c10::Error with dist's message.
  ProcessGroupDist(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupDist() override;

  const std::string getBackendName() const override { return "dist"; }
  // The dist plugin underneath ("gloo", "shm", ...).
  std::string PluginName() const;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  struct Pending {
    dist_work_t* handle;
    c10::intrusive_ptr<DistWork> work;
    std::function<void()> after;  // copies results out, on success
  };

  // Hands an issued dist operation to the completer. `issue` calls dist
  // with a work out-parameter; an error at issue throws here.
  c10::intrusive_ptr<c10d::Work> Enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         const std::function<dist_error_t*(dist_work_t**)>& issue,
                                         std::function<void()> after = nullptr);
  // A Work that is already done (operations run on the caller's thread).
  c10::intrusive_ptr<c10d::Work> Done(c10d::OpType type, std::vector<at::Tensor> outputs);
  // Uneven all-to-all (dist_all_to_all_v, blocking); counts and offsets
  // in elements.
  void AllToAllV(const at::Tensor& send, const std::vector<uint64_t>& send_offsets,
                 const std::vector<uint64_t>& send_counts, const at::Tensor& recv,
                 const std::vector<uint64_t>& recv_offsets,
                 const std::vector<uint64_t>& recv_counts);
  void Run();

  dist_process_group_t* group_ = nullptr;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::thread completer_;
};

}  // namespace dist_torch

#endif  // DIST_TORCH_PROCESS_GROUP_DIST_H_

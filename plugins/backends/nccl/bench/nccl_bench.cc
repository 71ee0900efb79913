// All-reduce bandwidth of the nccl plugin next to raw NCCL, measured side by
// side in one run on the same GPUs, buffers and streams: one rank per GPU,
// ranks are threads of this process. Prints, per message size, the time per
// operation, algorithm bandwidth (bytes / time) and bus bandwidth
// (algbw * 2(W-1)/W, as nccl-tests defines it) of both, and plugin/raw.
// With one GPU the bus bandwidth is 0 by definition, so the ratio is taken
// on algorithm bandwidth (the same thing for W > 1).
//
// Without a CUDA device it prints "SKIPPED: <reason>" and exits 0.
//
//   nccl_bench [--plugin=path/to/libdist-backend-nccl.so] [--world_size=0 (all GPUs)]
//              [--min_bytes=1048576] [--max_bytes=1073741824] [--iters=20] [--warmup=5]
//              [--rounds=3]
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"
#include "plugins/backends/nccl/testing/loaded_plugin.h"
#include "support/memory_store.h"

ABSL_FLAG(std::string, plugin, "", "path of libdist-backend-nccl.so (default: next to the bench)");
ABSL_FLAG(int, world_size, 0, "ranks (one GPU each); 0: every GPU of the machine");
ABSL_FLAG(int64_t, min_bytes, int64_t{1} << 20, "smallest message");
ABSL_FLAG(int64_t, max_bytes, int64_t{1} << 30, "largest message (x4 steps from min_bytes)");
ABSL_FLAG(int, iters, 20, "timed all-reduces per measurement");
ABSL_FLAG(int, warmup, 5, "untimed all-reduces before each measurement");
ABSL_FLAG(int, rounds, 3, "alternating raw/plugin measurements per size; the best counts");

namespace dist_nccl {
namespace {

// A reusable barrier for the rank threads.
class Barrier {
 public:
  explicit Barrier(int parties) : parties_(parties) {}
  void Arrive() {
    absl::MutexLock lock(&mu_);
    const int64_t generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    auto next = [this, generation]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != generation; };
    mu_.Await(absl::Condition(&next));
  }

 private:
  const int parties_;
  absl::Mutex mu_;
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "nccl_bench: %s\n", what.c_str());
  std::exit(1);
}

void CheckCuda(cudaError_t error, const char* what) {
  Check(error == cudaSuccess, absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

void CheckNccl(ncclResult_t result, const char* what) {
  Check(result == ncclSuccess, absl::StrCat(what, ": ", ncclGetErrorString(result)));
}

void CheckDist(dist_error_t* error, const char* what) {
  const absl::Status status = dist::TakeError(error);
  Check(status.ok(), absl::StrCat(what, ": ", status.ToString()));
}

struct Sizes {
  std::vector<int64_t> bytes;
};

// Per-size best seconds per operation (the slowest rank of a measurement).
struct Results {
  std::vector<double> raw;
  std::vector<double> plugin;
};

struct Shared {
  int world = 1;
  const dist_backend_plugin_t* plugin = nullptr;
  dist_store_t* store = nullptr;
  ncclUniqueId raw_id;
  std::vector<int64_t> sizes;
  int iters = 20;
  int warmup = 5;
  int rounds = 3;
  Barrier* barrier = nullptr;
  absl::Mutex mu;
  std::vector<double> slowest;  // per measurement: max over ranks
};

void RunRank(Shared& shared, int rank, Results* results) {
  CheckCuda(cudaSetDevice(rank), "cudaSetDevice");
  const int64_t max_bytes = shared.sizes.back();
  void* send = nullptr;
  void* recv = nullptr;
  CheckCuda(cudaMalloc(&send, static_cast<size_t>(max_bytes)), "cudaMalloc");
  CheckCuda(cudaMalloc(&recv, static_cast<size_t>(max_bytes)), "cudaMalloc");
  CheckCuda(cudaMemset(send, 0, static_cast<size_t>(max_bytes)), "cudaMemset");
  cudaStream_t stream = nullptr;
  CheckCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  ncclComm_t raw = nullptr;
  CheckNccl(ncclCommInitRank(&raw, shared.world, shared.raw_id, rank), "ncclCommInitRank");
  dist_comm_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = rank;
  config.world_size = shared.world;
  config.local_rank = rank;
  config.local_world_size = shared.world;
  config.store = shared.store;
  config.timeout_ms = 120000;
  config.group_name = "bench";
  config.device_index = rank;
  dist_backend_comm_t* comm = nullptr;
  CheckDist(shared.plugin->comm_create(&config, &comm), "comm_create");

  auto raw_loop = [&](int64_t bytes, int count) {
    for (int i = 0; i < count; ++i) {
      CheckNccl(ncclAllReduce(send, recv, static_cast<size_t>(bytes / 4), ncclFloat32, ncclSum, raw,
                              stream),
                "ncclAllReduce");
    }
    CheckCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };
  auto plugin_loop = [&](int64_t bytes, int count) {
    dist_op_args_t args{};
    args.struct_size = sizeof(args);
    args.send =
        dist_make_buffer(send, static_cast<uint64_t>(bytes / 4), DIST_FLOAT32, dist_cuda(rank));
    args.recv =
        dist_make_buffer(recv, static_cast<uint64_t>(bytes / 4), DIST_FLOAT32, dist_cuda(rank));
    args.send.stream = args.recv.stream = stream;
    args.op = DIST_SUM;
    dist_backend_work_t* last = nullptr;
    for (int i = 0; i < count; ++i) {
      dist_backend_work_t* work = nullptr;
      CheckDist(shared.plugin->all_reduce(comm, &args, &work), "plugin all_reduce");
      // Work completes in issue order on one stream: waiting the last is enough.
      if (last != nullptr) shared.plugin->work_destroy(last);
      last = work;
    }
    CheckDist(shared.plugin->work_wait(last, 120000), "plugin work_wait");
    shared.plugin->work_destroy(last);
  };
  // Times `count` operations on every rank; returns the slowest rank's seconds per op.
  auto measure = [&](const std::function<void(int64_t, int)>& loop, int64_t bytes) {
    loop(bytes, shared.warmup);
    shared.barrier->Arrive();
    const absl::Time start = absl::Now();
    loop(bytes, shared.iters);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start) / shared.iters;
    {
      absl::MutexLock lock(&shared.mu);
      shared.slowest.push_back(seconds);
    }
    shared.barrier->Arrive();
    double slowest = 0;
    {
      absl::MutexLock lock(&shared.mu);
      for (double s : shared.slowest) slowest = std::max(slowest, s);
    }
    shared.barrier->Arrive();
    if (rank == 0) {
      absl::MutexLock lock(&shared.mu);
      shared.slowest.clear();
    }
    shared.barrier->Arrive();
    return slowest;
  };

  for (size_t s = 0; s < shared.sizes.size(); ++s) {
    const int64_t bytes = shared.sizes[s];
    double best_raw = 1e30;
    double best_plugin = 1e30;
    // Alternate, so drift (clocks, temperature) hits both sides alike.
    for (int round = 0; round < shared.rounds; ++round) {
      best_raw = std::min(best_raw, measure(raw_loop, bytes));
      best_plugin = std::min(best_plugin, measure(plugin_loop, bytes));
    }
    if (rank == 0) {
      results->raw[s] = best_raw;
      results->plugin[s] = best_plugin;
    }
  }
  shared.plugin->comm_destroy(comm);
  ncclCommDestroy(raw);
  cudaStreamDestroy(stream);
  cudaFree(send);
  cudaFree(recv);
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string path = testing::FindNcclPlugin(absl::GetFlag(FLAGS_plugin), argv[0]);
  absl::StatusOr<const dist_backend_plugin_t*> plugin = testing::LoadBackendPlugin(path);
  Check(plugin.ok(), plugin.status().ToString());
  const absl::Status probe = dist::TakeError((*plugin)->probe());
  if (!probe.ok()) {
    std::printf("SKIPPED: %s\n", std::string(probe.message()).c_str());
    return 0;
  }
  int gpus = 0;
  CheckCuda(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
  Shared shared;
  shared.world = absl::GetFlag(FLAGS_world_size) > 0 ? absl::GetFlag(FLAGS_world_size) : gpus;
  Check(shared.world <= gpus, absl::StrCat("--world_size=", shared.world, " but this machine has ",
                                           gpus, " GPUs (NCCL runs one rank per GPU)"));
  shared.plugin = *plugin;
  shared.store = dist::NewMemoryStore();
  CheckNccl(ncclGetUniqueId(&shared.raw_id), "ncclGetUniqueId");
  for (int64_t bytes = absl::GetFlag(FLAGS_min_bytes); bytes <= absl::GetFlag(FLAGS_max_bytes);
       bytes *= 4) {
    shared.sizes.push_back(std::max<int64_t>(4, bytes / 4 * 4));
  }
  Check(!shared.sizes.empty(), "no message sizes between --min_bytes and --max_bytes");
  shared.iters = std::max(1, absl::GetFlag(FLAGS_iters));
  shared.warmup = std::max(0, absl::GetFlag(FLAGS_warmup));
  shared.rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  Barrier barrier(shared.world);
  shared.barrier = &barrier;
  Results results{std::vector<double>(shared.sizes.size()),
                  std::vector<double>(shared.sizes.size())};

  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("nccl_bench: all_reduce float32 sum, world size %d (%s), %s, plugin %s\n",
              shared.world, prop.name, (*plugin)->library_version(), path.c_str());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < shared.world; ++rank) {
    threads.emplace_back([&, rank] { RunRank(shared, rank, &results); });
  }
  for (std::thread& thread : threads) thread.join();

  const double bus_factor = 2.0 * (shared.world - 1) / shared.world;
  const bool use_bus = shared.world > 1;
  std::printf("%12s %10s %10s %10s | %10s %10s %10s | %8s\n", "bytes", "raw us", "raw algbw",
              "raw busbw", "plugin us", "algbw", "busbw", "plug/raw");
  double worst_large = 1e30;
  for (size_t s = 0; s < shared.sizes.size(); ++s) {
    const double bytes = static_cast<double>(shared.sizes[s]);
    const double raw_alg = bytes / results.raw[s] / 1e9;
    const double plugin_alg = bytes / results.plugin[s] / 1e9;
    const double ratio = plugin_alg / raw_alg;  // the same as the busbw ratio
    std::printf("%12lld %10.1f %10.2f %10.2f | %10.1f %10.2f %10.2f | %7.1f%%\n",
                static_cast<long long>(shared.sizes[s]), results.raw[s] * 1e6, raw_alg,
                raw_alg * bus_factor, results.plugin[s] * 1e6, plugin_alg, plugin_alg * bus_factor,
                ratio * 100);
    if (shared.sizes[s] >= (int64_t{64} << 20)) worst_large = std::min(worst_large, ratio);
  }
  if (worst_large < 1e29) {
    std::printf("plugin/raw %s bandwidth, messages >= 64 MiB: worst %.1f%% (target >= 98%%)\n",
                use_bus ? "bus" : "algorithm", worst_large * 100);
  }
  shared.store->release(shared.store->ctx);
  return 0;
}

}  // namespace
}  // namespace dist_nccl

int main(int argc, char** argv) { return dist_nccl::Main(argc, argv); }

// One process group, two backends: with DIST_BACKEND=cpu:gloo,cuda:nccl every
// buffer goes to the backend of its device. Each rank all-reduces a vector
// in host memory (gloo) and one on its GPU (nccl), and checks both against
// the sums it computes itself.
//
//   DIST_BACKEND=cpu:gloo,cuda:nccl distrun -n 2 gpu_allreduce
//
// Each rank uses the GPU of its local rank (LOCAL_RANK, which distrun,
// torchrun and Slurm set), as NCCL needs one GPU per rank.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/dist.hpp"

namespace {

constexpr int kCount = 1 << 16;

// Rank r contributes (r + 1) * (i % 97 + 1) at index i; the sum over ranks
// is world * (world + 1) / 2 * (i % 97 + 1).
double Expected(int world, int i) { return world * (world + 1) / 2.0 * (i % 97 + 1); }

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t cuda = cudaGetDeviceCount(&devices);
  if (cuda != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpu_allreduce: no CUDA device: %s\n",
                 cuda != cudaSuccess ? cudaGetErrorString(cuda) : "0 devices");
    return 1;
  }
  const char* local = std::getenv("LOCAL_RANK");
  const int device = (local != nullptr ? std::atoi(local) : 0) % devices;
  cudaSetDevice(device);  // before init: the nccl backend binds this GPU

  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init();
  if (!group.ok()) return Fail(-1, std::string(group.status().message()));
  const int rank = group->rank();
  const int world = group->world_size();

  std::vector<float> host(kCount);
  for (int i = 0; i < kCount; ++i) host[i] = static_cast<float>((rank + 1) * (i % 97 + 1));
  std::vector<float> from_gpu(kCount, -1.0f);
  float* gpu = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&gpu), kCount * sizeof(float)) != cudaSuccess ||
      cudaMemcpy(gpu, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
    return Fail(rank, "cudaMalloc/cudaMemcpy failed");
  }

  // Host memory: the cpu backend. Started asynchronously...
  absl::StatusOr<dist::Work> on_cpu =
      group->AllReduceAsync(dist::View(host), dist::View(host), DIST_SUM);
  if (!on_cpu.ok()) return Fail(rank, std::string(on_cpu.status().message()));
  // ...while the GPU buffer goes to the cuda backend.
  const dist_buffer_t on_gpu = dist_make_buffer(gpu, kCount, DIST_FLOAT32, dist_cuda(device));
  absl::Status status = group->AllReduce(on_gpu, on_gpu, DIST_SUM);
  if (!status.ok()) return Fail(rank, std::string(status.message()));
  status = on_cpu->Wait();
  if (!status.ok()) return Fail(rank, std::string(status.message()));
  cudaMemcpy(from_gpu.data(), gpu, kCount * sizeof(float), cudaMemcpyDeviceToHost);
  cudaFree(gpu);

  int wrong_cpu = 0;
  int wrong_gpu = 0;
  for (int i = 0; i < kCount; ++i) {
    wrong_cpu += host[i] != Expected(world, i);
    wrong_gpu += from_gpu[i] != Expected(world, i);
  }
  std::printf("rank %d of %d: cpu all_reduce via %s %s, cuda:%d all_reduce via %s %s\n", rank,
              world, group->backend(DIST_DEVICE_CPU), wrong_cpu == 0 ? "correct" : "WRONG", device,
              group->backend(DIST_DEVICE_CUDA), wrong_gpu == 0 ? "correct" : "WRONG");
  if (wrong_cpu != 0 || wrong_gpu != 0) return 2;
  return group->Barrier().ok() ? 0 : 1;
}

// dist::GradientReducer with its buckets on GPUs (CudaBucketMemory) over the
// nccl backend, through libdist.so: ranks are threads of this process, one
// GPU each (world size = GPUs, at most 4). Gradients live on the device,
// some in their buckets and some in the caller's buffers, in two dtypes and
// several buckets; after Finish() every rank must hold the average computed
// here on the host. Without a GPU it prints "SKIPPED: ..." and gtest reports
// it skipped; tests/nccl/emulation runs it on 4 emulated GPUs.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cuda_bucket_memory.hpp"
#include "dist/dist.hpp"
#include "dist/gradient_reducer.hpp"
#include "gtest/gtest.h"

namespace {

// Rank r's value of element i of a gradient in step s; the average over
// ranks is exact in float (see Expected).
double Value(int step, int rank, size_t salt, size_t i) {
  return static_cast<double>((rank + 1) * static_cast<int>((i + salt) % 13) + step);
}

double Expected(int step, int world, size_t salt, size_t i) {
  double sum = 0;
  for (int r = 0; r < world; ++r) sum += Value(step, r, salt, i);
  return sum / world;
}

struct Spec {
  std::string name;
  size_t count;
  dist_dtype_t dtype;
  bool bucketed;
};

template <typename T>
std::vector<T> HostValues(int step, int rank, size_t salt, size_t count) {
  std::vector<T> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<T>(Value(step, rank, salt, i));
  return out;
}

// One rank: init over file://, two steps of the reducer, checks.
void RunRank(int rank, int world, const std::string& store, std::vector<std::string>* failures) {
  auto fail = [&](const std::string& what) { (*failures)[rank] += what + "\n"; };
  if (cudaSetDevice(rank) != cudaSuccess) return fail("cudaSetDevice");
  dist::InitOptions init;
  init.backend = "nccl";
  init.init_method = absl::StrCat("file://", store, "?rank=", rank, "&world_size=", world);
  init.timeout = absl::Seconds(60);
  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init(init);
  if (!group.ok()) return fail(group.status().ToString());

  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    return fail("cudaStreamCreateWithFlags");
  }
  const std::vector<Spec> specs = {
      {"w1", 3001, DIST_FLOAT32, true},
      {"b1", 17, DIST_FLOAT32, false},
      {"w2", 1000, DIST_FLOAT64, false},  // its own bucket: another dtype
      {"w3", 5003, DIST_FLOAT32, true},
  };
  std::vector<void*> own(specs.size(), nullptr);  // the caller's buffers
  {
    dist::GradientReducer::Options options;
    options.first_bucket_bytes = 8 << 10;  // several buckets
    options.bucket_bytes = 16 << 10;
    options.memory = std::make_shared<dist::CudaBucketMemory>(rank, stream);
    dist::GradientReducer reducer(*group, options);
    for (size_t g = 0; g < specs.size(); ++g) {
      const Spec& spec = specs[g];
      absl::Status added;
      if (spec.bucketed) {
        added = reducer.AddBucketedGradient(spec.name, spec.count, spec.dtype);
      } else {
        if (cudaMalloc(&own[g], spec.count * dist_dtype_size(spec.dtype)) != cudaSuccess) {
          return fail("cudaMalloc");
        }
        added = reducer.AddGradient(
            spec.name, dist_make_buffer(own[g], spec.count, spec.dtype, dist_cuda(rank)));
      }
      if (!added.ok()) return fail(added.ToString());
    }
    if (absl::Status s = reducer.Finalize(); !s.ok()) return fail(s.ToString());
    if (reducer.num_buckets() < 3) fail(absl::StrCat("only ", reducer.num_buckets(), " buckets"));

    for (int step = 0; step < 2; ++step) {
      // The "backward pass": gradients appear on the stream, last first.
      for (size_t g = specs.size(); g-- > 0;) {
        const Spec& spec = specs[g];
        void* where = own[g];
        if (spec.bucketed) {
          absl::StatusOr<float*> data = reducer.BucketedData<float>(spec.name);
          if (!data.ok()) return fail(data.status().ToString());
          where = *data;
        }
        if (spec.dtype == DIST_FLOAT32) {
          static thread_local std::vector<float> host;
          host = HostValues<float>(step, rank, g, spec.count);
          cudaMemcpyAsync(where, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice,
                          stream);
        } else {
          static thread_local std::vector<double> host;
          host = HostValues<double>(step, rank, g, spec.count);
          cudaMemcpyAsync(where, host.data(), host.size() * sizeof(double), cudaMemcpyHostToDevice,
                          stream);
        }
        cudaStreamSynchronize(stream);  // the host vectors are reused
        if (absl::Status s = reducer.MarkReady(spec.name); !s.ok()) return fail(s.ToString());
      }
      if (absl::Status s = reducer.Finish(); !s.ok()) return fail(s.ToString());
      if (cudaStreamSynchronize(stream) != cudaSuccess) return fail("cudaStreamSynchronize");
      for (size_t g = 0; g < specs.size(); ++g) {
        const Spec& spec = specs[g];
        const void* where = own[g];
        if (spec.bucketed) where = reducer.BucketedData<float>(spec.name).value();
        std::vector<double> got(spec.count);
        if (spec.dtype == DIST_FLOAT32) {
          std::vector<float> f(spec.count);
          cudaMemcpy(f.data(), where, f.size() * sizeof(float), cudaMemcpyDeviceToHost);
          for (size_t i = 0; i < f.size(); ++i) got[i] = f[i];
        } else {
          cudaMemcpy(got.data(), where, got.size() * sizeof(double), cudaMemcpyDeviceToHost);
        }
        for (size_t i = 0; i < spec.count; ++i) {
          const double want = Expected(step, world, g, i);
          if (got[i] != want) {
            fail(absl::StrCat("rank ", rank, " step ", step, ": ", spec.name, "[", i, "] is ",
                              got[i], ", want ", want));
            break;
          }
        }
      }
    }
  }
  for (void* p : own) cudaFree(p);
  cudaStreamDestroy(stream);
}

TEST(GradientReducerOnGpus, AveragesDeviceGradientsOnEveryRank) {
  int count = 0;
  const cudaError_t cuda = cudaGetDeviceCount(&count);
  if (cuda != cudaSuccess || count == 0) {
    const std::string reason = cuda != cudaSuccess ? cudaGetErrorString(cuda) : "0 devices";
    std::printf("SKIPPED: no CUDA device: %s\n", reason.c_str());
    GTEST_SKIP() << "no CUDA device: " << reason;
  }
  const int world = count < 4 ? count : 4;
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string store = absl::StrCat(dir != nullptr ? dir : "/tmp", "/reducer.store");
  std::vector<std::string> failures(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(RunRank, r, world, store, &failures);
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(failures[static_cast<size_t>(r)], "") << "rank " << r;
  std::printf("averaged device gradients on world size %d over nccl\n", world);
}

}  // namespace

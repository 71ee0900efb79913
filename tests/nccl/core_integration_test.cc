// The nccl plugin as the core loads it (bundled beside libdist.so): on a
// machine without a GPU, dist_init with DIST_BACKEND=nccl fails with the
// probe's reason; with a GPU, a one-rank group all-reduces CUDA buffers
// through the host API.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/dist.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

std::string Message(dist_error_t* error) {
  std::string text = dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

dist_init_options_t NcclOptions(const std::string& store_path) {
  static std::string url;
  url = absl::StrCat("file://", store_path, "?rank=0&world_size=1");
  dist_init_options_t options = dist_init_options_default();
  options.backend = "nccl";
  options.init_method = url.c_str();
  options.timeout_ms = 30000;
  return options;
}

std::string StorePath(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

TEST(NcclThroughTheCore, InitFailsWithTheProbeReasonWithoutAGpu) {
  int count = 0;
  const cudaError_t cuda = cudaGetDeviceCount(&count);
  if (cuda == cudaSuccess && count > 0) GTEST_SKIP() << "this machine has a GPU";
  const dist_init_options_t options = NcclOptions(StorePath("nogpu.store"));
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(group, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_UNAVAILABLE);
  const std::string expected = cuda != cudaSuccess
                                   ? absl::StrCat("no CUDA device: ", cudaGetErrorString(cuda))
                                   : "no CUDA device: cudaGetDeviceCount found 0 devices";
  const std::string message = Message(error);
  std::printf("dist_init says: %s\n", message.c_str());
  EXPECT_THAT(message, HasSubstr(expected));
  EXPECT_THAT(message, HasSubstr("nccl"));
}

TEST(NcclThroughTheCore, AllReducesCudaBuffersOnOneGpu) {
  int count = 0;
  const cudaError_t cuda = cudaGetDeviceCount(&count);
  if (cuda != cudaSuccess || count == 0) {
    const std::string reason = cuda != cudaSuccess ? cudaGetErrorString(cuda) : "0 devices";
    std::printf("SKIPPED: no CUDA device: %s\n", reason.c_str());
    GTEST_SKIP() << "no CUDA device: " << reason;
  }
  const dist_init_options_t options = NcclOptions(StorePath("gpu.store"));
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_STREQ(dist_backend_name(group, DIST_DEVICE_CUDA), "nccl");
  const std::vector<float> host = {1.5f, -2.0f, 4.0f, 8.25f};
  float* device = nullptr;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device), 2 * host.size() * sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  dist_buffer_t send = dist_make_buffer(device, host.size(), DIST_FLOAT32, dist_cuda(0));
  dist_buffer_t recv =
      dist_make_buffer(device + host.size(), host.size(), DIST_FLOAT32, dist_cuda(0));
  error = dist_all_reduce(group, &send, &recv, DIST_MAX, nullptr);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  std::vector<float> out(host.size(), 0.0f);
  ASSERT_EQ(cudaMemcpy(out.data(), device + host.size(), out.size() * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(out, host);  // one rank: max over one contribution
  // Asynchronous, with a stream-ordered wait on the default stream.
  dist_work_t* work = nullptr;
  ASSERT_EQ(dist_all_reduce(group, &send, &send, DIST_SUM, &work), nullptr);
  error = dist_work_wait_stream(work, nullptr);
  EXPECT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  error = dist_work_wait(work, 10000);
  EXPECT_EQ(error, nullptr) << dist_error_message(error);
  dist_work_destroy(work);
  cudaFree(device);
  dist_destroy(group);
}

}  // namespace

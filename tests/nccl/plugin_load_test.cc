// The built libdist-backend-nccl.so on any machine with the CUDA toolkit,
// GPU or not: it loads, describes its libraries, and its probe and
// comm_create agree with what the CUDA runtime itself says about devices
// (queried here independently). On a machine without a GPU that means a
// clean "no CUDA device: <CUDA's reason>".
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/status.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/backends/nccl/testing/loaded_plugin.h"
#include "support/memory_store.h"

namespace dist_nccl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string g_plugin_path;

const dist_backend_plugin_t* Plugin() {
  static const dist_backend_plugin_t* table = [] {
    absl::StatusOr<const dist_backend_plugin_t*> loaded = testing::LoadBackendPlugin(g_plugin_path);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? *loaded : nullptr;
  }();
  return table;
}

// What the probe must say, worked out from the CUDA runtime directly.
std::string ExpectedProbeError() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return absl::StrCat("no CUDA device: ", cudaGetErrorString(error));
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  return "";
}

TEST(NcclPlugin, LoadsAndFillsTheWholeTable) {
  const dist_backend_plugin_t* table = Plugin();
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(std::string(table->name), "nccl");
  EXPECT_EQ(table->abi_major, static_cast<uint32_t>(DIST_BACKEND_ABI_MAJOR));
  EXPECT_EQ(table->abi_minor, static_cast<uint32_t>(DIST_BACKEND_ABI_MINOR));
  EXPECT_GE(table->struct_size, sizeof(dist_backend_plugin_t));
  for (auto op : {table->all_reduce, table->broadcast, table->reduce, table->all_gather,
                  table->gather, table->scatter, table->reduce_scatter, table->all_to_all,
                  table->barrier, table->send, table->recv}) {
    EXPECT_NE(op, nullptr);
  }
  EXPECT_NE(table->comm_split, nullptr);
  EXPECT_NE(table->work_wait_stream, nullptr);
  // The variable-count collectives are the plugin's own (NCCL groups).
  EXPECT_NE(table->run_v, nullptr);
}

TEST(NcclPlugin, LibraryVersionNamesNcclAndTheCudaRuntime) {
  const dist_backend_plugin_t* table = Plugin();
  ASSERT_NE(table, nullptr);
  int nccl = 0;
  ASSERT_EQ(ncclGetVersion(&nccl), ncclSuccess);
  int runtime = 0;
  ASSERT_EQ(cudaRuntimeGetVersion(&runtime), cudaSuccess);
  // The NCCL that is loaded (it may be newer than the headers built with).
  const std::string expected =
      absl::StrCat("NCCL ", nccl / 10000, ".", (nccl % 10000) / 100, ".", nccl % 100,
                   " (CUDA runtime ", runtime / 1000, ".", (runtime % 1000) / 10, ")");
  EXPECT_EQ(std::string(table->library_version()), expected);
  std::printf("library_version: %s\n", table->library_version());
}

TEST(NcclPlugin, ProbeAgreesWithTheCudaRuntime) {
  const dist_backend_plugin_t* table = Plugin();
  ASSERT_NE(table, nullptr);
  const std::string expected = ExpectedProbeError();
  dist_error_t* error = table->probe();
  if (expected.empty()) {
    EXPECT_EQ(error, nullptr) << dist_error_message(error);
  } else {
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(dist_error_code(error), DIST_UNAVAILABLE);
    EXPECT_EQ(std::string(dist_error_message(error)), expected);
    std::printf("probe says: unavailable: %s\n", dist_error_message(error));
  }
  dist_error_destroy(error);
}

TEST(NcclPlugin, CapabilitiesAreCudaOnly) {
  const dist_backend_plugin_t* table = Plugin();
  ASSERT_NE(table, nullptr);
  dist_backend_capabilities_t caps{};
  caps.struct_size = sizeof(caps);
  table->get_capabilities(&caps);
  EXPECT_EQ(caps.device_types, 1u << DIST_DEVICE_CUDA);
  EXPECT_TRUE(caps.flags & DIST_CAP_STREAM_WAIT);
  EXPECT_TRUE(caps.flags & DIST_CAP_SUBGROUPS);
  EXPECT_TRUE(caps.flags & DIST_CAP_CUDA_AWARE);
  EXPECT_FALSE(caps.flags & DIST_CAP_THREAD_MULTIPLE);
  EXPECT_EQ(caps.all_reduce_ops & (1u << DIST_BAND), 0u);
}

TEST(NcclPlugin, CommCreateWithoutAGpuFailsCleanlyWithTheProbeReason) {
  const std::string expected = ExpectedProbeError();
  if (expected.empty()) GTEST_SKIP() << "this machine has a CUDA device (see gpu_collectives_test)";
  const dist_backend_plugin_t* table = Plugin();
  ASSERT_NE(table, nullptr);
  dist_store_t* store = dist::NewMemoryStore();
  dist_comm_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = 0;
  config.world_size = 1;
  config.local_rank = -1;
  config.local_world_size = -1;
  config.store = store;
  config.timeout_ms = 5000;
  config.group_name = "default";
  config.device_index = -1;
  dist_backend_comm_t* comm = reinterpret_cast<dist_backend_comm_t*>(0x1);
  dist_error_t* error = table->comm_create(&config, &comm);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_UNAVAILABLE);
  EXPECT_EQ(std::string(dist_error_message(error)), expected);
  EXPECT_EQ(comm, nullptr);
  dist_error_destroy(error);
  store->release(store->ctx);
}

TEST(NcclPlugin, NullArgumentsAreErrorsNotCrashes) {
  const dist_backend_plugin_t* table = Plugin();
  ASSERT_NE(table, nullptr);
  dist_error_t* error = table->comm_create(nullptr, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  dist_error_destroy(error);
  dist_backend_work_t* work = nullptr;
  error = table->all_reduce(nullptr, nullptr, &work);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  dist_error_destroy(error);
  table->comm_destroy(nullptr);
  table->work_destroy(nullptr);
}

}  // namespace
}  // namespace dist_nccl

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist_nccl::g_plugin_path = dist_nccl::testing::FindNcclPlugin(argc > 1 ? argv[1] : "", argv[0]);
  return RUN_ALL_TESTS();
}

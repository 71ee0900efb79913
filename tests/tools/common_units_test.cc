// //support's device memory and local launcher, on their own.
#include <signal.h>
#include <sys/wait.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "dist/types.h"
#include "gtest/gtest.h"
#include "support/device_memory.h"
#include "support/local_launcher.h"

namespace dist {
namespace {

TEST(DeviceBuffer, HostBufferCopiesAndMirrors) {
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(dist_cpu(), 8);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  DeviceBuffer& b = **buffer;
  EXPECT_EQ(b.bytes(), 8u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  const char in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(b.CopyIn(in, sizeof(in)).ok());
  EXPECT_EQ(static_cast<char*>(b.data(3))[0], 4);
  char out[16] = {};
  ASSERT_TRUE(b.CopyOut(out, sizeof(out)).ok());  // copies bytes() at most
  EXPECT_EQ(std::memcmp(in, out, 8), 0);
  EXPECT_EQ(out[8], 0);

  b.host().assign(8, 0x5A);
  ASSERT_TRUE(b.Upload().ok());
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[7], 0x5A);
  static_cast<unsigned char*>(b.data())[0] = 0x11;
  ASSERT_TRUE(b.Download().ok());
  EXPECT_EQ(b.host()[0], 0x11);
}

TEST(DeviceBuffer, EmptyBufferHasStorage) {
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(dist_cpu(), 0);
  ASSERT_TRUE(buffer.ok());
  EXPECT_NE((*buffer)->data(), nullptr);
  EXPECT_TRUE((*buffer)->Upload().ok());
  EXPECT_TRUE((*buffer)->Download().ok());
  EXPECT_TRUE(SynchronizeDevice(dist_cpu()).ok());
}

TEST(DeviceBuffer, CudaWithoutDeviceSaysWhy) {
  absl::StatusOr<int> count = CudaDeviceCount();
  if (count.ok() && *count > 0) GTEST_SKIP() << "this machine has a CUDA device";
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(dist_cuda(0), 8);
  ASSERT_FALSE(buffer.ok());
  EXPECT_TRUE(absl::IsUnavailable(buffer.status())) << buffer.status();
}

LocalProcess Shell(const std::string& name, const std::string& script) {
  return LocalProcess{name, "/bin/sh", {"sh", "-c", script}, {}};
}

TEST(LocalLauncher, CollectsExitsAndEnvironment) {
  std::vector<LocalProcess> processes = {Shell("zero", "exit 0"),
                                         Shell("env", "exit $DIST_LAUNCHER_TEST_CODE"),
                                         Shell("signal", "kill -SEGV $$")};
  processes[1].env = {{"DIST_LAUNCHER_TEST_CODE", "7"}};
  absl::StatusOr<LocalLaunchResult> result = RunLocalProcesses(processes, LocalLaunchOptions{});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exits.size(), 3u);
  EXPECT_EQ(ExitCodeOf(result->exits[0].status), 0);
  EXPECT_EQ(ExitCodeOf(result->exits[1].status), 7);
  EXPECT_EQ(ExitCodeOf(result->exits[2].status), 128 + SIGSEGV);
  EXPECT_GE(result->first_failure, 1);
  EXPECT_EQ(result->signal, 0);
}

TEST(LocalLauncher, MissingProgramExits127) {
  absl::StatusOr<LocalLaunchResult> result = RunLocalProcesses(
      {LocalProcess{"rank 0", "/nonexistent/program", {"program"}, {}}}, LocalLaunchOptions{});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(ExitCodeOf(result->exits[0].status), 127);
}

TEST(LocalLauncher, StopsTheOthersAfterAFailure) {
  LocalLaunchOptions options;
  options.tool = "common_units_test";
  options.stop_on_failure = true;
  options.grace = absl::Seconds(1);
  const absl::Time start = absl::Now();
  // The second ignores SIGTERM: only SIGKILL after the grace period ends it.
  absl::StatusOr<LocalLaunchResult> result = RunLocalProcesses(
      {Shell("fails", "sleep 0.5; exit 3"), Shell("sleeps", "trap '' TERM; sleep 60 & wait")},
      options);
  ASSERT_TRUE(result.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(result->first_failure, 0);
  EXPECT_EQ(ExitCodeOf(result->exits[0].status), 3);
  EXPECT_EQ(ExitCodeOf(result->exits[1].status), 128 + SIGKILL);
  EXPECT_FALSE(result->exits[1].timed_out);
}

TEST(LocalLauncher, KillsAtTheTimeoutWithoutStoppingOnFailure) {
  LocalLaunchOptions options;
  options.timeout = absl::Seconds(1);
  const absl::Time start = absl::Now();
  absl::StatusOr<LocalLaunchResult> result =
      RunLocalProcesses({Shell("fails", "exit 1"), Shell("hangs", "sleep 60")}, options);
  ASSERT_TRUE(result.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(result->first_failure, 0);
  EXPECT_FALSE(result->exits[0].timed_out);
  EXPECT_TRUE(result->exits[1].timed_out);
  EXPECT_TRUE(WIFSIGNALED(result->exits[1].status));
}

}  // namespace
}  // namespace dist

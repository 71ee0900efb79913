// The gloo backend's device choice: which rendezvous host it routes towards
// (the effective init method the core passes, not only the environment),
// and what a rank out of file descriptors is told.
#include "plugins/backends/gloo/device.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dist_gloo {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

dist_comm_config_t Config(std::vector<dist_kv_t>* options) {
  dist_comm_config_t config{};
  config.struct_size = sizeof(config);
  config.rank = 0;
  config.world_size = 2;
  config.local_rank = -1;
  config.local_world_size = -1;
  config.timeout_ms = 5000;
  config.options = options->data();
  config.num_options = options->size();
  config.group_name = "test";
  config.device_index = -1;
  return config;
}

int OpenDescriptors() {
  int open = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    static_cast<void>(entry);
    ++open;
  }
  return open - 1;  // the iterator's own
}

// A server in this process (a store, as rank 0 hosts one) holds 40
// connections; the rank is then at its open-files limit. Gloo cannot open
// its device, and the error says the process is out of descriptors and who
// holds them, not which interface to pick.
TEST(CreateDevice, OutOfDescriptorsNamesWhoHoldsThem) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // At the open-files limit the sanitizers' own runtime cannot open what it
  // needs: UBSan's vptr checks then fail falsely on any virtual call.
  GTEST_SKIP() << "runs in the normal build only: the sanitizer runtimes need descriptors";
#endif
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 64), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    fds.push_back(client);
    const int accepted = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(accepted, 0);
    fds.push_back(accepted);
  }

  std::vector<dist_kv_t> options = {{"gloo.hostname", "127.0.0.1"}};
  const dist_comm_config_t config = Config(&options);
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit full = saved;
  full.rlim_cur = static_cast<rlim_t>(OpenDescriptors());
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &full), 0);
  std::string description;
  const auto device = CreateDevice(config, &description);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  for (int fd : fds) close(fd);
  close(listener);

  ASSERT_FALSE(device.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(device.status())) << device.status();
  const std::string message(device.status().message());
  EXPECT_THAT(message, HasSubstr("out of file descriptors"));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("40 of them connections accepted on port ", port)));
  EXPECT_THAT(message, HasSubstr("ulimit -n"));
  EXPECT_THAT(message, Not(HasSubstr("DIST_GLOO_IFNAME")));
}

// The rendezvous host comes from the init method the core passes (argument
// > DIST_INIT_METHOD > config file, picked by the core): a tcp:// URL names
// it even when MASTER_ADDR names another host or DIST_INIT_METHOD another
// URL; env:// takes master_addr= from its URL first, then MASTER_ADDR.
TEST(RendezvousHost, IsTheEffectiveInitMethodsHost) {
  setenv("MASTER_ADDR", "env-host", 1);
  setenv("DIST_INIT_METHOD", "tcp://environment-host:1", 1);
  std::string source;

  std::vector<dist_kv_t> options = {{DIST_OPTION_INIT_METHOD, "tcp://[fd00::7]:29500"}};
  EXPECT_EQ(RendezvousHost(Config(&options), &source), "fd00::7");
  EXPECT_EQ(source, "the init method tcp://[fd00::7]:29500");

  options = {{DIST_OPTION_INIT_METHOD, "env://?master_addr=url-host&master_port=29500"}};
  EXPECT_EQ(RendezvousHost(Config(&options), &source), "url-host");

  options = {{DIST_OPTION_INIT_METHOD, "env://"}};
  EXPECT_EQ(RendezvousHost(Config(&options), &source), "env-host");
  EXPECT_EQ(source, "MASTER_ADDR");

  // A core that predates the option: the environment's init method.
  options = {{"gloo.timeout_ms", "1000"}};
  EXPECT_EQ(RendezvousHost(Config(&options), &source), "environment-host");

  unsetenv("MASTER_ADDR");
  unsetenv("DIST_INIT_METHOD");
  options = {{DIST_OPTION_INIT_METHOD, "file:///tmp/rendezvous"}};
  EXPECT_EQ(RendezvousHost(Config(&options), &source), "");
}

}  // namespace
}  // namespace dist_gloo

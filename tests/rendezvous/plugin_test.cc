// The three plugins loaded from their .so files, driven in-process through
// the C ABI: URL and environment handling, precedence, and the errors for
// every malformed input.
#include <stdlib.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"
#include "dist/cpp/store.hpp"
#include "gtest/gtest.h"
#include "plugins/store/tcp_store_server.h"
#include "tests/rendezvous/test_support.h"

namespace dist {
namespace {

using ::testing::TestWithParam;

struct Resolved {
  dist_rendezvous_result_t result{};
  ~Resolved() {
    if (result.store != nullptr) result.store->release(result.store->ctx);
  }
};

absl::StatusOr<std::unique_ptr<Resolved>> Resolve(const std::string& scheme, const std::string& url,
                                                  int rank = -1, int world_size = -1,
                                                  const std::string& token = "",
                                                  int64_t timeout_ms = 3000) {
  absl::StatusOr<const dist_rendezvous_plugin_t*> plugin = testing::LoadPlugin(scheme);
  if (!plugin.ok()) return plugin.status();
  dist_kv_t option = {"store_token", token.c_str()};
  dist_rendezvous_hints_t hints = {sizeof(hints), rank, world_size,
                                   token.empty() ? nullptr : &option, token.empty() ? 0u : 1u};
  auto resolved = std::make_unique<Resolved>();
  resolved->result.struct_size = sizeof(dist_rendezvous_result_t);
  absl::Status status =
      TakeError((*plugin)->resolve(url.c_str(), &hints, timeout_ms, &resolved->result));
  if (!status.ok()) return status;
  return resolved;
}

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::ClearLauncherEnv(); }
  void TearDown() override { testing::ClearLauncherEnv(); }
};

// rank 0 of a one-rank tcp:// job whose hints carry `options`.
absl::StatusOr<std::unique_ptr<Resolved>> ResolveWithOptions(
    const std::vector<std::pair<std::string, std::string>>& options) {
  absl::StatusOr<const dist_rendezvous_plugin_t*> plugin = testing::LoadPlugin("tcp");
  if (!plugin.ok()) return plugin.status();
  std::vector<dist_kv_t> kv;
  for (const auto& [key, value] : options) kv.push_back({key.c_str(), value.c_str()});
  dist_rendezvous_hints_t hints = {sizeof(hints), -1, -1, kv.data(), kv.size()};
  auto resolved = std::make_unique<Resolved>();
  resolved->result.struct_size = sizeof(dist_rendezvous_result_t);
  const std::string url =
      absl::StrCat("tcp://127.0.0.1:", testing::FreePort(), "?rank=0&world_size=1");
  absl::Status status = TakeError((*plugin)->resolve(url.c_str(), &hints, 3000, &resolved->result));
  if (!status.ok()) return status;
  return resolved;
}

TEST_F(PluginTest, StoreLimitsAreOptionsOfTheServerRankZeroHosts) {
  // A store of 2 KiB: a 4 KiB value is refused naming the limit, a small one fits.
  auto small = ResolveWithOptions({{"store.max_store_bytes", "2048"}, {"gloo.ifname", "lo"}});
  ASSERT_TRUE(small.ok()) << small.status();
  dist_store_t* store = (*small)->result.store;
  const std::string big(4096, 'x');
  absl::Status refused = TakeError(store->set(store->ctx, "big", big.data(), big.size()));
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "max_store_bytes")) << refused;
  EXPECT_TRUE(TakeError(store->set(store->ctx, "small", "v", 1)).ok());

  struct Bad {
    std::string key, value, expect;
  };
  for (const Bad& bad : {
           Bad{"store.max_connections", "0", "store limit max_connections is out of range"},
           Bad{"store.max_store_bytes", "lots", "store limit max_store_bytes='lots' is not"},
           Bad{"store.handshake_timeout", "soon", "handshake_timeout='soon' is not a duration"},
           Bad{"store.max_conections", "5", "unknown store limit 'max_conections'"},
       }) {
    auto resolved = ResolveWithOptions({{bad.key, bad.value}});
    ASSERT_FALSE(resolved.ok()) << bad.key;
    EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(resolved.status().message(), bad.expect))
        << "want '" << bad.expect << "' in: " << resolved.status().message();
    EXPECT_TRUE(absl::StrContains(resolved.status().message(), "tcp://127.0.0.1:"))
        << resolved.status().message();
  }
}

TEST_F(PluginTest, TablesAreWellFormed) {
  for (const std::string name : {"env", "tcp", "file"}) {
    auto plugin = testing::LoadPlugin(name);
    ASSERT_TRUE(plugin.ok()) << plugin.status();
    EXPECT_EQ((*plugin)->struct_size, sizeof(dist_rendezvous_plugin_t));
    EXPECT_EQ((*plugin)->abi_major, DIST_RENDEZVOUS_ABI_MAJOR);
    EXPECT_EQ(std::string((*plugin)->name), name);
    ASSERT_NE((*plugin)->schemes, nullptr);
    EXPECT_EQ(std::string((*plugin)->schemes[0]), name);
    EXPECT_EQ((*plugin)->schemes[1], nullptr);
  }
}

struct BadUrl {
  std::string scheme;
  std::string url;
  std::string expect;  // a fragment the error must contain
};

void PrintTo(const BadUrl& bad, std::ostream* os) { *os << bad.url; }

class MalformedUrlTest : public PluginTest, public ::testing::WithParamInterface<BadUrl> {};

TEST_P(MalformedUrlTest, IsAnInvalidArgumentThatExplains) {
  const BadUrl& bad = GetParam();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  auto resolved = Resolve(bad.scheme, bad.url);
  ASSERT_FALSE(resolved.ok()) << bad.url;
  EXPECT_EQ(resolved.status().code(), absl::StatusCode::kInvalidArgument) << resolved.status();
  EXPECT_TRUE(absl::StrContains(resolved.status().message(), bad.expect))
      << "want '" << bad.expect << "' in: " << resolved.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Urls, MalformedUrlTest,
    ::testing::Values(
        BadUrl{"tcp", "tcp://127.0.0.1?rank=0&world_size=1", "no port"},
        BadUrl{"tcp", "tcp://:29500?rank=0&world_size=1", "no host"},
        BadUrl{"tcp", "tcp://127.0.0.1:notaport?rank=0&world_size=1", "'notaport'"},
        BadUrl{"tcp", "tcp://127.0.0.1:70000?rank=0&world_size=1", "1..65535"},
        BadUrl{"tcp", "tcp://::1:29500?rank=0&world_size=1", "brackets"},
        BadUrl{"tcp", "tcp://[::1:29500?rank=0&world_size=1", "without ']'"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank=zero&world_size=1", "rank='zero'"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank=0&wrold_size=1",
               "unknown parameter 'wrold_size'"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank=0&rank=1&world_size=2", "given twice"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank=4&world_size=4", "out of range"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank=0&world_size=0", "world_size='0'"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank=0&world_size=1&external=maybe", "not a boolean"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500/path?rank=0&world_size=1", "no path"},
        BadUrl{"tcp", "127.0.0.1:29500", "no scheme"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank", "not key=value"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?rank=%zz", "%-escape"},
        BadUrl{"tcp", "tcp://127.0.0.1:29500?world_size=2", "rank is unknown"},
        BadUrl{"env", "env://somehost:29500", "takes no host"},
        BadUrl{"env", "env://?rank=0&world_size=1&master_port=http", "master_port='http'"},
        BadUrl{"env", "env://?bogus=1", "unknown parameter 'bogus'"},
        BadUrl{"file", "file://relative/path?rank=0&world_size=1", "three slashes"},
        BadUrl{"file", "file:///?rank=0&world_size=1", "no file name"},
        BadUrl{"file", "file:///tmp/dir/?rank=0&world_size=1", "no file name"},
        BadUrl{"file", "file:///tmp/x?rank=0&world_size=1&bind=1", "unknown parameter 'bind'"},
        BadUrl{"file", "tcp://127.0.0.1:1?rank=0&world_size=1", "handles only file://"}),
    [](const auto& info) { return absl::StrCat(info.param.scheme, "_", info.index); });

TEST_F(PluginTest, EnvNamesTheMissingVariable) {
  auto no_addr = Resolve("env", "env://", 0, 1);
  ASSERT_FALSE(no_addr.ok());
  EXPECT_TRUE(absl::StrContains(no_addr.status().message(), "MASTER_ADDR is not set"))
      << no_addr.status();

  setenv("MASTER_ADDR", "127.0.0.1", 1);
  auto no_port = Resolve("env", "env://", 0, 1);
  ASSERT_FALSE(no_port.ok());
  EXPECT_TRUE(absl::StrContains(no_port.status().message(), "MASTER_PORT is not set"))
      << no_port.status();

  setenv("MASTER_PORT", "29x", 1);
  auto bad_port = Resolve("env", "env://", 0, 1);
  ASSERT_FALSE(bad_port.ok());
  EXPECT_TRUE(absl::StrContains(bad_port.status().message(), "MASTER_PORT='29x'"))
      << bad_port.status();

  setenv("MASTER_PORT", std::to_string(testing::FreePort()).c_str(), 1);
  auto no_rank = Resolve("env", "env://");
  ASSERT_FALSE(no_rank.ok());
  const std::string message(no_rank.status().message());
  EXPECT_TRUE(absl::StrContains(message, "RANK is not set")) << message;
  EXPECT_TRUE(absl::StrContains(message, "OMPI_COMM_WORLD_RANK")) << message;
  EXPECT_TRUE(absl::StrContains(message, "SLURM_PROCID")) << message;

  setenv("RANK", "0", 1);
  auto no_world = Resolve("env", "env://");
  ASSERT_FALSE(no_world.ok());
  EXPECT_TRUE(absl::StrContains(no_world.status().message(), "WORLD_SIZE is not set"))
      << no_world.status();

  setenv("WORLD_SIZE", "four", 1);
  auto bad_world = Resolve("env", "env://");
  ASSERT_FALSE(bad_world.ok());
  EXPECT_TRUE(absl::StrContains(bad_world.status().message(), "WORLD_SIZE='four'"))
      << bad_world.status();

  setenv("WORLD_SIZE", "1", 1);
  setenv("RANK", "-3", 1);
  auto negative = Resolve("env", "env://");
  ASSERT_FALSE(negative.ok());
  EXPECT_TRUE(absl::StrContains(negative.status().message(), "RANK='-3'")) << negative.status();

  setenv("RANK", "0", 1);
  auto ok = Resolve("env", "env://");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->result.rank, 0);
  EXPECT_EQ((*ok)->result.world_size, 1);
  EXPECT_EQ((*ok)->result.local_rank, -1);
}

struct LauncherCase {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;
  int rank, world_size, local_rank, local_world_size;
};

void PrintTo(const LauncherCase& c, std::ostream* os) { *os << c.name; }

class LauncherEnvTest : public PluginTest, public ::testing::WithParamInterface<LauncherCase> {};

// Each launcher's variables alone are enough. Rank 0 is used so the rank
// hosts the store itself; rendezvous_process_test covers other ranks of
// env:// end to end.
TEST_P(LauncherEnvTest, RanksComeFromTheLauncher) {
  const LauncherCase& c = GetParam();
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(testing::FreePort()).c_str(), 1);
  for (const auto& [key, value] : c.env) setenv(key.c_str(), value.c_str(), 1);
  auto resolved = Resolve("env", "env://");
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ((*resolved)->result.rank, c.rank);
  EXPECT_EQ((*resolved)->result.world_size, c.world_size);
  EXPECT_EQ((*resolved)->result.local_rank, c.local_rank);
  EXPECT_EQ((*resolved)->result.local_world_size, c.local_world_size);
}

INSTANTIATE_TEST_SUITE_P(
    Launchers, LauncherEnvTest,
    ::testing::Values(
        LauncherCase{
            "torchrun",
            {{"RANK", "0"}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}},
            0,
            3,
            0,
            2},
        LauncherCase{"openmpi",
                     {{"OMPI_COMM_WORLD_RANK", "0"},
                      {"OMPI_COMM_WORLD_SIZE", "5"},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
                     0,
                     5,
                     0,
                     4},
        LauncherCase{"slurm",
                     {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "0"}},
                     0,
                     6,
                     0,
                     -1},
        LauncherCase{"pmi", {{"PMI_RANK", "0"}, {"PMI_SIZE", "7"}}, 0, 7, -1, -1},
        // RANK wins over a launcher's variable.
        LauncherCase{"rank_beats_ompi",
                     {{"RANK", "0"},
                      {"WORLD_SIZE", "2"},
                      {"OMPI_COMM_WORLD_RANK", "1"},
                      {"OMPI_COMM_WORLD_SIZE", "9"}},
                     0,
                     2,
                     -1,
                     -1}),
    [](const auto& info) { return info.param.name; });

TEST_F(PluginTest, MalformedLauncherVariableIsNamed) {
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  setenv("SLURM_PROCID", "1", 1);
  setenv("SLURM_NTASKS", "2(x3)", 1);
  auto resolved = Resolve("env", "env://");
  ASSERT_FALSE(resolved.ok());
  EXPECT_TRUE(absl::StrContains(resolved.status().message(), "SLURM_NTASKS='2(x3)'"))
      << resolved.status();
}

TEST_F(PluginTest, QueryOverridesEnvironmentAndHintsOverrideBoth) {
  const int port = testing::FreePort();
  setenv("MASTER_ADDR", "no-such-host.invalid", 1);
  setenv("MASTER_PORT", "1", 1);
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "9", 1);
  // The query's master address, port, rank and size win over the env.
  auto by_query = Resolve("env",
                          absl::StrCat("env://?master_addr=127.0.0.1&master_port=", port,
                                       "&rank=0&world_size=2&local_rank=0&local_world_size=2"),
                          -1, -1, "", 300);
  ASSERT_TRUE(by_query.ok()) << by_query.status();
  EXPECT_EQ((*by_query)->result.rank, 0);
  EXPECT_EQ((*by_query)->result.world_size, 2);
  EXPECT_EQ((*by_query)->result.local_world_size, 2);
  by_query->reset();
  // Hints win over the query.
  auto by_hints = Resolve(
      "tcp", absl::StrCat("tcp://127.0.0.1:", testing::FreePort(), "?rank=3&world_size=4"), 0, 3);
  ASSERT_TRUE(by_hints.ok()) << by_hints.status();
  EXPECT_EQ((*by_hints)->result.rank, 0);
  EXPECT_EQ((*by_hints)->result.world_size, 3);
}

TEST_F(PluginTest, TcpPortInUseSaysWhatToDo) {
  store::TcpStoreServerOptions options;
  options.bind_host = "127.0.0.1";
  auto other_job = store::TcpStoreServer::Start(options);
  ASSERT_TRUE(other_job.ok());
  const std::string url =
      absl::StrCat("tcp://127.0.0.1:", (*other_job)->port(), "?rank=0&world_size=2");
  auto resolved = Resolve("tcp", url);
  ASSERT_FALSE(resolved.ok());
  const std::string message(resolved.status().message());
  EXPECT_TRUE(absl::StrContains(message, url)) << message;
  EXPECT_TRUE(absl::StrContains(message, "already in use")) << message;
  EXPECT_TRUE(absl::StrContains(message, "pick another port")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(PluginTest, TcpTokenFromHintOrEnvironment) {
  const int port = testing::FreePort();
  const std::string url = absl::StrCat("tcp://127.0.0.1:", port, "?world_size=2");
  auto host = Resolve("tcp", url, 0, -1, "hint-token");
  ASSERT_TRUE(host.ok()) << host.status();
  auto wrong = Resolve("tcp", url, 1, -1, "other-token");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated) << wrong.status();
  EXPECT_TRUE(absl::StrContains(wrong.status().message(), url)) << wrong.status();
  setenv("DIST_STORE_TOKEN", "hint-token", 1);
  auto right = Resolve("tcp", url, 1);
  ASSERT_TRUE(right.ok()) << right.status();
  // Both ranks see one store.
  ASSERT_TRUE(StoreView((*host)->result.store).Set("from0", "hello").ok());
  EXPECT_EQ(StoreView((*right)->result.store).Get("from0", absl::Seconds(1)).value(), "hello");
}

TEST_F(PluginTest, RankZeroLingersUntilOthersLeave) {
  const int port = testing::FreePort();
  const std::string url = absl::StrCat("tcp://127.0.0.1:", port, "?world_size=2");
  auto rank0 = Resolve("tcp", url, 0, -1, "", 5000);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  auto rank1 = Resolve("tcp", url, 1, -1, "", 5000);
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  // Rank 0 releases first (on another thread: release blocks while
  // lingering); rank 1 keeps using the store meanwhile.
  std::thread release0([&] { rank0->reset(); });
  absl::SleepFor(absl::Milliseconds(300));
  StoreView view((*rank1)->result.store);
  ASSERT_TRUE(view.Set("after-rank0-left", "still served").ok());
  EXPECT_EQ(view.Get("after-rank0-left", absl::Seconds(1)).value(), "still served");
  const absl::Time start = absl::Now();
  rank1->reset();
  release0.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST_F(PluginTest, TcpOverIPv6Loopback) {
  store::TcpStoreServerOptions probe_options;
  probe_options.bind_host = "::1";
  auto probe = store::TcpStoreServer::Start(probe_options);
  if (!probe.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << probe.status();
  const int port = (*probe)->port();
  (*probe)->Stop();
  probe->reset();
  const std::string url = absl::StrCat("tcp://[::1]:", port, "?world_size=2");
  auto rank0 = Resolve("tcp", url, 0);
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  auto rank1 = Resolve("tcp", url, 1);
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(StoreView((*rank1)->result.store).Set("v6", "yes").ok());
  EXPECT_EQ(StoreView((*rank0)->result.store).Get("v6", absl::Seconds(1)).value(), "yes");
  // env:// with a bare IPv6 MASTER_ADDR.
  setenv("MASTER_ADDR", "::1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  auto by_env = Resolve("env", "env://", 1, 2);
  ASSERT_TRUE(by_env.ok()) << by_env.status();
  EXPECT_EQ(StoreView((*by_env)->result.store).Get("v6", absl::Seconds(1)).value(), "yes");
  rank1->reset();
  by_env->reset();
}

TEST_F(PluginTest, FileUnreachableDirectoryIsExplained) {
  auto resolved = Resolve("file", "file:///nonexistent-dir-xyz/rdzv?rank=0&world_size=1");
  ASSERT_FALSE(resolved.ok());
  EXPECT_TRUE(absl::StrContains(resolved.status().message(), "/nonexistent-dir-xyz/rdzv"))
      << resolved.status();
  EXPECT_TRUE(absl::StrContains(resolved.status().message(), "directory")) << resolved.status();
}

TEST_F(PluginTest, ArgumentsAreChecked) {
  auto plugin = testing::LoadPlugin("tcp");
  ASSERT_TRUE(plugin.ok());
  dist_rendezvous_result_t result{};
  result.struct_size = 4;  // too small
  dist_error_t* error =
      (*plugin)->resolve("tcp://127.0.0.1:1?rank=0&world_size=1", nullptr, 1000, &result);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  dist_error_destroy(error);
  result.struct_size = sizeof(result);
  error = (*plugin)->resolve("tcp://127.0.0.1:1?rank=0&world_size=1", nullptr, 0, &result);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(dist_error_message(error), "timeout"));
  dist_error_destroy(error);
  error = (*plugin)->resolve(nullptr, nullptr, 1000, &result);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  dist_error_destroy(error);
}

// sdk/ABI.md: a caller's hints and result are read by their struct_size, so
// a core built against an older or a newer 1.x SDK works with these plugins.
TEST_F(PluginTest, OlderAndNewerCallersStructsAreHonoured) {
  auto plugin = testing::LoadPlugin("file");
  ASSERT_TRUE(plugin.ok());
  // A newer core's hints: larger, with trailing fields this SDK lacks.
  struct {
    dist_rendezvous_hints_t hints;
    char appended[16];
  } newer;
  std::memset(&newer, 0x7f, sizeof(newer));
  newer.hints.struct_size = sizeof(newer);
  newer.hints.rank = 0;
  newer.hints.world_size = 1;
  newer.hints.options = nullptr;
  newer.hints.num_options = 0;
  // An older core's result: only the 1.0 fields, then memory that is not its.
  struct {
    dist_rendezvous_result_t result;
    char beyond[16];
  } older;
  std::memset(&older, 0x5a, sizeof(older));
  older.result.struct_size = offsetof(dist_rendezvous_result_t, store) + sizeof(dist_store_t*);
  const std::string url = "file://" + testing::TempPath("sizes");
  dist_error_t* error = (*plugin)->resolve(url.c_str(), &newer.hints, 3000, &older.result);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_EQ(older.result.rank, 0);
  EXPECT_EQ(older.result.world_size, 1);
  ASSERT_NE(older.result.store, nullptr);
  older.result.store->release(older.result.store->ctx);
  for (char c : older.beyond) EXPECT_EQ(c, 0x5a);  // nothing written past struct_size
  // Below the 1.0 size is a caller bug.
  newer.hints.struct_size = offsetof(dist_rendezvous_hints_t, num_options);
  error = (*plugin)->resolve(url.c_str(), &newer.hints, 3000, &older.result);
  EXPECT_EQ(dist_error_code(error), DIST_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(dist_error_message(error), "hints->struct_size"))
      << dist_error_message(error);
  dist_error_destroy(error);
}

}  // namespace
}  // namespace dist

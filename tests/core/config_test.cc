// Configuration precedence and every bad value of every variable.
#include "core/config.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace dist {
namespace {

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"DIST_BACKEND", "DIST_INIT_METHOD", "DIST_TIMEOUT", "DIST_CONFIG",
                             "DIST_LOG_LEVEL", "DIST_DEBUG", "DIST_TRACE_ENTRIES", "DIST_TRACE_DIR",
                             "DIST_SURVIVAL", "DIST_FAILURE_DETECT_MS"}) {
      unsetenv(name);
    }
  }

  std::string WriteConfig(const std::string& name, const std::string& text) {
    const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
};

TEST_F(ConfigTest, DefaultsWhenNothingIsSet) {
  absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->backend.value, "gloo");
  EXPECT_EQ(config->backend.source, "default");
  EXPECT_EQ(config->init_method.value, "env://");
  EXPECT_EQ(config->timeout_duration, absl::Minutes(5));
  EXPECT_EQ(config->log_level_value, DIST_LOG_WARN);
  ASSERT_EQ(config->device_map.size(), 1u);
  EXPECT_FALSE(config->device_map[0].device.has_value());
}

TEST_F(ConfigTest, AnMpiBackendDefaultsToTheMpiInitMethod) {
  setenv("DIST_BACKEND", "mpi", 1);
  absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->init_method.value, "mpi://");
  EXPECT_EQ(config->init_method.source, "default (backend mpi)");
  // The build named in a device map keeps its scheme.
  setenv("DIST_BACKEND", "cpu:mpich,cuda:nccl", 1);
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->init_method.value, "mpich://");
  // An init method that was set wins.
  setenv("DIST_INIT_METHOD", "env://", 1);
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->init_method.value, "env://");
  EXPECT_EQ(config->init_method.source, "environment (DIST_INIT_METHOD)");
}

TEST_F(ConfigTest, ArgumentBeatsEnvironmentBeatsFileBeatsDefault) {
  const std::string file = WriteConfig("precedence.toml",
                                       "backend = \"mpi\"\n"
                                       "init_method = \"file:///tmp/x\"\n"
                                       "timeout = 45\n"
                                       "log_level = \"debug\"\n"
                                       "[gloo]\nifname = \"lo\"\n");
  setenv("DIST_CONFIG", file.c_str(), 1);
  setenv("DIST_INIT_METHOD", "tcp://127.0.0.1:29500", 1);
  dist_init_options_t options = dist_init_options_default();
  options.backend = "shm";
  absl::StatusOr<ResolvedConfig> config = ResolveConfig(&options);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->backend.value, "shm");
  EXPECT_EQ(config->backend.source, "argument");
  EXPECT_EQ(config->init_method.value, "tcp://127.0.0.1:29500");
  EXPECT_EQ(config->init_method.source, "environment (DIST_INIT_METHOD)");
  EXPECT_EQ(config->timeout_duration, absl::Seconds(45));
  EXPECT_EQ(config->timeout.source, "config file (" + file + ")");
  EXPECT_EQ(config->log_level_value, DIST_LOG_DEBUG);
  ASSERT_EQ(config->options.size(), 1u);
  EXPECT_EQ(config->options[0].key, "gloo.ifname");
  EXPECT_EQ(config->options[0].value, "lo");
}

TEST_F(ConfigTest, TimeoutForms) {
  EXPECT_EQ(*ParseTimeout("30", "x"), absl::Seconds(30));
  EXPECT_EQ(*ParseTimeout("500ms", "x"), absl::Milliseconds(500));
  EXPECT_EQ(*ParseTimeout("2m", "x"), absl::Minutes(2));
  EXPECT_EQ(*ParseTimeout("1.5", "x"), absl::Milliseconds(1500));
  for (const char* bad : {"", "abc", "-5", "0", "10 parsecs", "inf"}) {
    absl::StatusOr<absl::Duration> parsed = ParseTimeout(bad, "environment (DIST_TIMEOUT)");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("DIST_TIMEOUT"), std::string::npos);
    EXPECT_NE(parsed.status().message().find("30s"), std::string::npos) << "names the fix";
  }
}

TEST_F(ConfigTest, BadEnvironmentValuesNameTheVariable) {
  struct Case {
    const char* variable;
    const char* value;
    const char* expected;
  } cases[] = {
      {"DIST_TIMEOUT", "soon", "DIST_TIMEOUT"},
      {"DIST_LOG_LEVEL", "loud", "DIST_LOG_LEVEL"},
      {"DIST_BACKEND", "cpu:gloo,nccl", "has no device"},
      {"DIST_BACKEND", "tpu:xla", "unknown device 'tpu'"},
      {"DIST_BACKEND", "cpu:gloo,cpu:mpi", "appears twice"},
      {"DIST_BACKEND", "Gloo!", "not a backend name"},
      {"DIST_BACKEND", "cpu:", "not a backend name"},
      {"DIST_INIT_METHOD", "localhost:29500", "not a URL"},
      {"DIST_CONFIG", "/nonexistent/dist.toml", "cannot be opened"},
      {"DIST_DEBUG", "loud", "use off or detail"},
      {"DIST_TRACE_ENTRIES", "-1", "0 turns the flight recorder off"},
      {"DIST_TRACE_ENTRIES", "many", "not a number in [0, 100000]"},
  };
  for (const Case& c : cases) {
    SetUp();
    setenv(c.variable, c.value, 1);
    absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
    ASSERT_FALSE(config.ok()) << c.variable << "=" << c.value;
    EXPECT_NE(config.status().message().find(c.expected), std::string::npos)
        << config.status().message();
    if (std::string(c.variable) != "DIST_CONFIG") {
      EXPECT_NE(config.status().message().find(c.variable), std::string::npos)
          << config.status().message();
    }
    EXPECT_EQ(config.status().message().find('\n'), std::string::npos) << "one line";
  }
}

TEST_F(ConfigTest, BadConfigFilesNameTheLine) {
  struct Case {
    const char* text;
    const char* expected;
  } cases[] = {
      {"backend = \"gloo\"\nbakend = \"mpi\"\n", "line 2: unknown key 'bakend'"},
      {"backend = 3\n", "'backend' must be a string"},
      {"timeout = \"forever\"\n", "not a positive duration"},
      {"backend = \"gloo\n", "invalid TOML"},
      {"[gloo]\nifname = [1, 2]\n", "must be a string, number or boolean"},
      // Found by tests/fuzz/config_fuzz: toml++ asserted on it.
      {"[)gloo\nyfname  \n", "invalid TOML"},
  };
  // Found by tests/fuzz/config_fuzz: toml++ reached an assertion (undefined
  // behaviour without assertions) on a non-ASCII character where it looked
  // for whitespace; in strings and comments such text is fine.
  {
    const std::string path = WriteConfig("greek.toml", "timeout=\xce\xbe cpu \n");
    setenv("DIST_CONFIG", path.c_str(), 1);
    absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("line 1: invalid TOML: a non-ASCII character"),
              std::string::npos)
        << config.status().message();
    const std::string fine =
        WriteConfig("greek_ok.toml",
                    "# \xce\xbe comment\n[gloo]\nifname = \"\xce\xbe\" # \xce\xbe\n"
                    "x = \"\"\"a\n\xce\xbe\"\"\"\ny = '\xce\xbe'\n");
    setenv("DIST_CONFIG", fine.c_str(), 1);
    absl::StatusOr<ResolvedConfig> ok = ResolveConfig(nullptr);
    EXPECT_TRUE(ok.ok()) << ok.status();
  }
  // Found by tests/fuzz/config_fuzz: toml++ asserted on a NUL after '['.
  {
    const std::string path =
        WriteConfig("nul.toml", std::string("[") + '\0' + "\x04glfon\nomaie = \n");
    setenv("DIST_CONFIG", path.c_str(), 1);
    absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.status().message().find("line 1: invalid TOML: control character 0x00"),
              std::string::npos)
        << config.status().message();
  }
  int index = 0;
  for (const Case& c : cases) {
    const std::string path = WriteConfig("bad" + std::to_string(index++) + ".toml", c.text);
    setenv("DIST_CONFIG", path.c_str(), 1);
    absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_NE(config.status().message().find(c.expected), std::string::npos)
        << config.status().message();
    EXPECT_NE(config.status().message().find(path), std::string::npos);
  }
}

// DIST_CONFIG at something that is not a config file: an error at once,
// not a dist_init that waits for a FIFO's writer for ever or reads until
// memory runs out.
TEST_F(ConfigTest, AConfigPathThatIsNoFileIsRefusedAtOnce) {
  const std::string fifo = std::string(std::getenv("TEST_TMPDIR")) + "/config.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = WriteConfig("big.toml", "# " + std::string(2 << 20, 'x') + "\n");
  struct Case {
    std::string path;
    const char* expected;
  } cases[] = {
      {fifo, "is not a regular file"},
      {"/dev/zero", "is not a regular file"},
      {big, "more than a config file can be"},
  };
  for (const Case& c : cases) {
    setenv("DIST_CONFIG", c.path.c_str(), 1);
    absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
    ASSERT_FALSE(config.ok()) << c.path;
    EXPECT_NE(config.status().message().find(c.expected), std::string::npos)
        << config.status().message();
    EXPECT_NE(config.status().message().find(c.path), std::string::npos);
  }
}

TEST_F(ConfigTest, TraceAndDebugOptions) {
  absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->debug_detail);
  EXPECT_EQ(config->trace_entries_value, 2000);
  EXPECT_EQ(config->trace_dir.value, "");

  const std::string path = WriteConfig("trace.toml",
                                       "debug = \"detail\"\n"
                                       "trace_entries = 50\n"
                                       "trace_dir = \"/tmp/traces\"\n");
  setenv("DIST_CONFIG", path.c_str(), 1);
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->debug_detail);
  EXPECT_EQ(config->trace_entries_value, 50);
  EXPECT_EQ(config->trace_dir.value, "/tmp/traces");
  EXPECT_EQ(config->trace_dir.source, "config file (" + path + ")");

  setenv("DIST_TRACE_ENTRIES", "0", 1);
  setenv("DIST_DEBUG", "off", 1);
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->debug_detail);
  EXPECT_EQ(config->trace_entries_value, 0);
  EXPECT_EQ(config->trace_entries.source, "environment (DIST_TRACE_ENTRIES)");
}

// The survival settings follow the same order as every other setting; an
// option passed as an argument counts as the argument.
TEST_F(ConfigTest, SurvivalSettingsFollowThePrecedence) {
  absl::StatusOr<ResolvedConfig> config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->survival_enabled);
  EXPECT_EQ(config->survival.value, "off");
  EXPECT_EQ(config->failure_detect, absl::Milliseconds(500));

  const std::string path = WriteConfig("survival.toml",
                                       "survival = true\n"
                                       "failure_detect_ms = 800\n");
  setenv("DIST_CONFIG", path.c_str(), 1);
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->survival_enabled);
  EXPECT_EQ(config->survival.source, "config file (" + path + ")");
  EXPECT_EQ(config->failure_detect, absl::Milliseconds(800));

  // The environment beats the file (it did not before: the file's options won).
  setenv("DIST_SURVIVAL", "0", 1);
  setenv("DIST_FAILURE_DETECT_MS", "300", 1);
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->survival_enabled);
  EXPECT_EQ(config->survival.source, "environment (DIST_SURVIVAL)");
  EXPECT_EQ(config->failure_detect, absl::Milliseconds(300));

  // An option in the file's tables counts as the file: below the environment.
  const std::string tables =
      WriteConfig("survival_tables.toml", "[options]\n\"dist.survival\" = \"on\"\n");
  setenv("DIST_CONFIG", tables.c_str(), 1);
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->survival_enabled);
  unsetenv("DIST_SURVIVAL");
  config = ResolveConfig(nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->survival_enabled);
  EXPECT_EQ(config->survival.source, "config file (" + tables + ") option dist.survival");

  // An option passed as an argument beats all.
  setenv("DIST_SURVIVAL", "1", 1);
  dist_kv_t off[] = {{"dist.survival", "off"}, {"dist.failure_detect_ms", "1000"}};
  dist_init_options_t options = dist_init_options_default();
  options.options = off;
  options.num_options = 2;
  config = ResolveConfig(&options);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->survival_enabled);
  EXPECT_EQ(config->survival.source, "argument (option dist.survival)");
  EXPECT_EQ(config->failure_detect, absl::Seconds(1));

  // distinfo's rows show both, with where they came from.
  bool shown = false;
  for (const ConfigOption& row : ConfigRows(*config)) {
    if (row.key == "survival") shown = row.value == "off" && row.source == config->survival.source;
  }
  EXPECT_TRUE(shown);

  dist_kv_t bad[] = {{"dist.failure_detect_ms", "20"}};
  options.options = bad;
  options.num_options = 1;
  config = ResolveConfig(&options);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "argument (option dist.failure_detect_ms): '20' is not a failure detection bound in "
            "milliseconds in [50, 600000]");
}

TEST_F(ConfigTest, DeviceMaps) {
  absl::StatusOr<std::vector<DeviceAssignment>> map = ParseDeviceMap("cpu:gloo, cuda:nccl", "x");
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->size(), 2u);
  EXPECT_EQ((*map)[0].device, DIST_DEVICE_CPU);
  EXPECT_EQ((*map)[0].backend, "gloo");
  EXPECT_EQ((*map)[1].device, DIST_DEVICE_CUDA);
  EXPECT_EQ((*map)[1].backend, "nccl");
  map = ParseDeviceMap("/opt/x/libdist-backend-y.so", "x");
  ASSERT_TRUE(map.ok());
  EXPECT_EQ((*map)[0].backend, "/opt/x/libdist-backend-y.so");
  map = ParseDeviceMap("cpu:/opt/x/libdist-backend-y.so", "x");
  ASSERT_TRUE(map.ok());
  EXPECT_EQ((*map)[0].backend, "/opt/x/libdist-backend-y.so");
  EXPECT_FALSE(ParseDeviceMap("", "x").ok());
  EXPECT_FALSE(ParseDeviceMap(",", "x").ok());
}

TEST_F(ConfigTest, BadArguments) {
  dist_init_options_t options = dist_init_options_default();
  options.world_size = 4;
  options.rank = 4;
  absl::StatusOr<ResolvedConfig> config = ResolveConfig(&options);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("rank 4 is outside"), std::string::npos);
  options = dist_init_options_default();
  options.timeout_ms = -1;
  EXPECT_FALSE(ResolveConfig(&options).ok());
  options = dist_init_options_default();
  options.struct_size = 4;
  config = ResolveConfig(&options);
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("dist_init_options_default"), std::string::npos);
}

}  // namespace
}  // namespace dist

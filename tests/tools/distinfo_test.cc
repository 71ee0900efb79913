// distinfo end to end: the real binary, the real bundled plugins (gloo,
// mpi, shm, nccl where CUDA was found at build time), real broken plugin
// files, and a real self-test (gloo ranks over TCP, mpi through mpirun).
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "dist/rendezvous_plugin.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/device_memory.h"
#include "tests/tools/subprocess.h"

namespace dist::testing {
namespace {

using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

std::string Distinfo() { return RunfilePath("tools/distinfo/distinfo"); }

ProcessResult RunDistinfo(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), Distinfo());
  // The test's own environment must not steer the result.
  for (const char* var : {"DIST_BACKEND=", "DIST_INIT_METHOD=", "DIST_CONFIG=", "DIST_TIMEOUT=",
                          "DIST_PLUGIN_PATH="}) {
    env.insert(env.begin(), var);
  }
  return Subprocess::Run(args, env, absl::Seconds(100));
}

json ParseJson(const ProcessResult& r) {
  json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON:\n" << r.out << r.err;
  return j;
}

const json* FindNamed(const json& list, const std::string& name) {
  for (const json& entry : list) {
    if (entry.value("name", "") == name) return &entry;
  }
  return nullptr;
}

// Whether this machine can run NCCL at all (a driver and a device).
bool HaveCudaDevice() {
  absl::StatusOr<int> count = dist::CudaDeviceCount();
  return count.ok() && *count > 0;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

void CopyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  ASSERT_TRUE(in.good()) << from;
  std::ofstream(to, std::ios::binary) << in.rdbuf();
}

// One plugin's lines in the text listing: its status line ("  gloo: ok")
// and the indented fields under it; empty when it is not listed.
std::string PluginBlock(const std::string& out, const std::string& status_line) {
  size_t start = out.find("\n" + status_line + "\n");
  if (start == std::string::npos) return "";
  ++start;
  size_t end = start + status_line.size() + 1;
  while (end < out.size() && out.compare(end, 4, "    ") == 0) {
    end = out.find('\n', end) + 1;
  }
  return out.substr(start, end - start);
}

// "Backends: 3 usable of 4 (gloo, mpi, shm)" without the "of 4".
std::string UsableSummary(const std::string& out, const std::string& heading) {
  size_t start = out.find("\n" + heading);
  if (start == std::string::npos) return "";
  std::string line = out.substr(start + 1, out.find('\n', start + 1) - start - 1);
  size_t of = line.find(" of ");
  size_t after = line.find_first_not_of("0123456789", of + 4);
  return line.substr(0, of) + line.substr(after == std::string::npos ? line.size() : after);
}

TEST(DistinfoTest, ListsTheBackendsOfThisMachine) {
  ProcessResult r = RunDistinfo({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("Backend plugin ABI:    ", DIST_BACKEND_ABI_MAJOR, ".",
                                            DIST_BACKEND_ABI_MINOR)));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("Rendezvous plugin ABI: ", DIST_RENDEZVOUS_ABI_MAJOR,
                                            ".", DIST_RENDEZVOUS_ABI_MINOR)));
  EXPECT_THAT(r.out, HasSubstr("/dist/plugins (beside libdist.so)"));
  EXPECT_THAT(r.out, HasSubstr("\n  gloo: ok\n"));
  // The MPI backend, built once per implementation.
  EXPECT_THAT(r.out, HasSubstr("\n  openmpi: ok\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  mpich: ok\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  shm: ok\n"));
  EXPECT_THAT(r.out, HasSubstr("Library:             Gloo"));
  EXPECT_THAT(r.out, HasSubstr("Library:             Open MPI v4.1"));
  EXPECT_THAT(r.out, HasSubstr("Library:             MPICH 4.0"));
#if DIST_TEST_CUDA_FOUND
  if (HaveCudaDevice()) {
    EXPECT_THAT(r.out, HasSubstr("\n  nccl: ok\n"));
  } else {
    EXPECT_THAT(r.out, HasSubstr("\n  nccl: unavailable: no CUDA device"));
  }
  EXPECT_THAT(r.out, HasSubstr("Library:             NCCL"));
#endif
  EXPECT_THAT(r.out, HasSubstr("all_reduce ops:      sum product min max avg"));
  EXPECT_THAT(r.out, HasSubstr("Schemes:             tcp://"));
  EXPECT_THAT(r.out, HasSubstr("Schemes:             env://"));
  EXPECT_THAT(r.out, HasSubstr("Configuration (what dist_init would use):"));
  EXPECT_THAT(r.out, ContainsRegex("backend +gloo +default"));
  EXPECT_THAT(r.out, ContainsRegex("survival +off +default"));
  EXPECT_THAT(r.out, ContainsRegex("Flags: +subgroups thread_multiple shrink"));
}

TEST(DistinfoTest, JsonHasEveryField) {
  ProcessResult r = RunDistinfo({"--json"}, {"DIST_BACKEND=shm", "DIST_TIMEOUT=45s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = ParseJson(r);
  EXPECT_FALSE(j.value("version", "").empty());
  EXPECT_EQ(j["abi"]["backend"]["major"], DIST_BACKEND_ABI_MAJOR);
  EXPECT_EQ(j["abi"]["backend"]["minor"], DIST_BACKEND_ABI_MINOR);
  EXPECT_EQ(j["abi"]["rendezvous"]["major"], DIST_RENDEZVOUS_ABI_MAJOR);
  ASSERT_GE(j["plugin_search_path"].size(), 1u);
  EXPECT_EQ(j["plugin_search_path"][0]["origin"], "beside libdist.so");
  EXPECT_EQ(j["plugin_search_path"][0]["exists"], true);

  const json* gloo = FindNamed(j["backends"], "gloo");
  ASSERT_NE(gloo, nullptr) << j.dump(2);
  EXPECT_EQ((*gloo)["status"], "ok");
  EXPECT_EQ((*gloo)["usable"], true);
  EXPECT_TRUE((*gloo)["reason"].is_null());
  EXPECT_EQ((*gloo)["abi_major"], DIST_BACKEND_ABI_MAJOR);
  EXPECT_TRUE(absl::EndsWith((*gloo)["path"].get<std::string>(), "/libdist-backend-gloo.so"));
  EXPECT_THAT((*gloo)["library_version"].get<std::string>(), HasSubstr("Gloo"));
  const json& caps = (*gloo)["capabilities"];
  EXPECT_THAT(caps["devices"], Contains("cpu"));
  EXPECT_THAT(caps["dtypes"], Contains("float32"));
  EXPECT_THAT(caps["collectives"], Contains("all_reduce"));
  EXPECT_THAT(caps["collectives"], Contains("barrier"));
  EXPECT_THAT(caps["ops"]["all_reduce"], Contains("sum"));
  EXPECT_TRUE(caps.contains("flags"));

  for (const auto& [name, library] :
       {std::make_pair("openmpi", "Open MPI v4.1"), std::make_pair("mpich", "MPICH 4.0")}) {
    const json* mpi = FindNamed(j["backends"], name);
    ASSERT_NE(mpi, nullptr) << name;
    EXPECT_THAT((*mpi)["capabilities"]["flags"], Contains("needs_launcher"));
    EXPECT_THAT((*mpi)["library_version"].get<std::string>(), HasSubstr(library));
    // Its mpi:// rendezvous, named alike.
    const json* rendezvous = FindNamed(j["rendezvous"], name);
    ASSERT_NE(rendezvous, nullptr) << name;
  }
#if DIST_TEST_CUDA_FOUND
  const json* nccl = FindNamed(j["backends"], "nccl");
  ASSERT_NE(nccl, nullptr);
  if (!HaveCudaDevice()) {
    EXPECT_EQ((*nccl)["status"], "unavailable");
    EXPECT_THAT((*nccl)["reason"].get<std::string>(), HasSubstr("no CUDA device"));
  }
  EXPECT_THAT((*nccl)["capabilities"]["devices"], Contains("cuda"));
#endif

  const json* tcp = FindNamed(j["rendezvous"], "tcp");
  ASSERT_NE(tcp, nullptr);
  EXPECT_THAT((*tcp)["schemes"], Contains("tcp"));
  EXPECT_EQ((*tcp)["abi_major"], DIST_RENDEZVOUS_ABI_MAJOR);

  // The configuration with its sources, as set above.
  std::map<std::string, std::pair<std::string, std::string>> config;
  for (const json& row : j["config"]) {
    config[row["key"]] = {row["value"], row["source"]};
  }
  EXPECT_EQ(config["backend"].first, "shm");
  EXPECT_EQ(config["backend"].second, "environment (DIST_BACKEND)");
  EXPECT_EQ(config["timeout_ms"].first, "45000");
  EXPECT_EQ(config["init_method"].second, "default");
  EXPECT_TRUE(j["config_error"].is_null());
  // Nothing crashed, so the one listing child answered for all plugins.
  EXPECT_FALSE(j.contains("isolation_note"));
}

TEST(DistinfoTest, ConfigFileIsNamedAsTheSource) {
  std::string dir = MakeTempDir("distinfo_config");
  std::string file = dir + "/dist.toml";
  WriteFile(file, "backend = \"mpi\"\ninit_method = \"tcp://127.0.0.1:1234\"\n");
  ProcessResult r = RunDistinfo({"--config", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\n  backend +mpi +config file \\("));
  r = RunDistinfo({"--config", file, "--json"}, {"DIST_BACKEND=gloo"});
  json j = ParseJson(r);
  std::map<std::string, std::pair<std::string, std::string>> config;
  for (const json& row : j["config"]) config[row["key"]] = {row["value"], row["source"]};
  // The environment beats the file; the file beats the default.
  EXPECT_EQ(config["backend"],
            std::make_pair(std::string("gloo"), std::string("environment (DIST_BACKEND)")));
  EXPECT_EQ(config["init_method"].first, "tcp://127.0.0.1:1234");
  EXPECT_THAT(config["init_method"].second, HasSubstr(absl::StrCat("config file (", file)));
  EXPECT_EQ(config["config_file"].second, "argument");
}

TEST(DistinfoTest, BadConfigIsReportedNotFatal) {
  ProcessResult r = RunDistinfo({}, {"DIST_TIMEOUT=soon"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  error: "));
  EXPECT_THAT(r.out, HasSubstr("DIST_TIMEOUT"));
  EXPECT_THAT(r.out, HasSubstr("\n  gloo: ok\n"));
}

TEST(DistinfoTest, RequireOfAMissingBackendFailsNamingIt) {
  ProcessResult r = RunDistinfo({"--require", "gloo,nosuchbackend"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("distinfo: gloo: ok"));
  EXPECT_THAT(r.err, HasSubstr("distinfo: nosuchbackend: missing: no "
                               "libdist-backend-nosuchbackend.so in "));
  EXPECT_THAT(r.err, HasSubstr("--require failed: nosuchbackend not usable here"));
  EXPECT_THAT(r.err, Not(HasSubstr("gloo")));
}

TEST(DistinfoTest, RequireOfUsableBackendsAndSchemesPasses) {
  ProcessResult r =
      RunDistinfo({"--require=gloo,mpi,openmpi,mpich,shm,tcp://,env://,mpi://,mpich://"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("distinfo: mpi: ok"));  // "mpi": the build the core would pick
  EXPECT_THAT(r.out, HasSubstr("distinfo: mpich: ok"));
  EXPECT_THAT(r.out, HasSubstr("distinfo: mpi://: ok"));
  EXPECT_THAT(r.out, HasSubstr("distinfo: tcp://: ok"));
  r = RunDistinfo({"--require=nosuch://"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no usable rendezvous plugin handles nosuch://"));
}

#if DIST_TEST_CUDA_FOUND
TEST(DistinfoTest, RequireNcclWithoutDeviceSaysWhy) {
  if (HaveCudaDevice()) GTEST_SKIP() << "this machine has a CUDA device";
  ProcessResult r = RunDistinfo({"--require", "nccl", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  json j = ParseJson(r);
  ASSERT_EQ(j["require"].size(), 1u);
  EXPECT_EQ(j["require"][0]["ok"], false);
  EXPECT_THAT(j["require"][0]["detail"].get<std::string>(),
              HasSubstr("unavailable: no CUDA device"));
}
#endif

TEST(DistinfoTest, BrokenPluginsShowTheirReasonAndDoNotBreakTheListing) {
  std::string dir = MakeTempDir("distinfo_plugins");
  WriteFile(dir + "/libdist-backend-broken.so", std::string(200, 'g'));
  const std::string fixtures = "tests/core/fixtures/";
  CopyFile(RunfilePath(fixtures + "libdist-backend-fixture_wrong_major.so"),
           dir + "/libdist-backend-fixture_wrong_major.so");
  CopyFile(RunfilePath(fixtures + "libdist-backend-fixture_missing_dep.so"),
           dir + "/libdist-backend-fixture_missing_dep.so");
  // A second gloo later in the path is shadowed by the bundled one.
  CopyFile(RunfilePath("core/dist/plugins/libdist-backend-gloo.so"),
           dir + "/libdist-backend-gloo.so");

  ProcessResult r = RunDistinfo({}, {"DIST_PLUGIN_PATH=" + dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(dir, " (DIST_PLUGIN_PATH)")));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("  broken: load failed: ", dir,
                                            "/libdist-backend-broken.so: not a complete ELF "
                                            "shared object for this machine (no ELF magic)")));
  EXPECT_THAT(r.out, HasSubstr("  fixture_wrong_major: bad ABI: plugin ABI 2."));
  EXPECT_THAT(r.out, HasSubstr("  fixture_missing_dep: load failed: "
                               "libdist-absent-dependency.so.1: cannot open shared object file"));
  EXPECT_THAT(r.out, HasSubstr("  gloo: shadowed: shadowed by "));
  // Everything else is still listed and usable.
  EXPECT_THAT(r.out, HasSubstr("\n  gloo: ok\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  shm: ok\n"));

  r = RunDistinfo({"--json"}, {"DIST_PLUGIN_PATH=" + dir});
  json j = ParseJson(r);
  const json* broken = FindNamed(j["backends"], "broken");
  ASSERT_NE(broken, nullptr);
  EXPECT_EQ((*broken)["status"], "load_failed");
  EXPECT_THAT((*broken)["reason"].get<std::string>(),
              HasSubstr("not a complete ELF shared object for this machine (no ELF magic)"));
  EXPECT_TRUE((*broken)["capabilities"].is_null());
  const json* wrong = FindNamed(j["backends"], "fixture_wrong_major");
  ASSERT_NE(wrong, nullptr);
  EXPECT_EQ((*wrong)["status"], "bad_abi");
  EXPECT_EQ((*wrong)["abi_major"], 2);

  // --require names the broken one with its reason.
  r = RunDistinfo({"--require", "broken"}, {"DIST_PLUGIN_PATH=" + dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("broken: load failed: "));
  EXPECT_THAT(r.err, HasSubstr("not a complete ELF shared object for this machine (no ELF magic)"));
}

TEST(DistinfoTest, CrashingPluginsAreListedAsCrashedAndTheOthersAsUsual) {
  std::string dir = MakeTempDir("distinfo_crashing");
  CopyFile(RunfilePath("tests/tools/libdist-backend-crashing_probe.so"),
           dir + "/libdist-backend-crashing_probe.so");
  CopyFile(RunfilePath("tests/tools/libdist-backend-aborting_constructor.so"),
           dir + "/libdist-backend-aborting_constructor.so");
  // A plugin that fails without crashing, and a second gloo that the
  // bundled one shadows, still read as such.
  CopyFile(RunfilePath("tests/core/fixtures/libdist-backend-fixture_wrong_major.so"),
           dir + "/libdist-backend-fixture_wrong_major.so");
  CopyFile(RunfilePath("core/dist/plugins/libdist-backend-gloo.so"),
           dir + "/libdist-backend-gloo.so");
  const std::vector<std::string> env = {"DIST_PLUGIN_PATH=" + dir};
  const std::string segv_reason = absl::StrCat(
      "SIGSEGV (Segmentation fault) in the initialize or probe of ", dir,
      "/libdist-backend-crashing_probe.so; rebuild the plugin or remove it from ", dir);

  ProcessResult normal = RunDistinfo({});
  ASSERT_EQ(normal.exit_code, 0) << normal.err;
  ProcessResult r = RunDistinfo({}, env);
  EXPECT_EQ(r.term_signal, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("\n  crashing_probe: crashed: ", segv_reason, "\n")));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "\n  aborting_constructor: crashed: SIGABRT (Aborted) while loading ", dir,
                         "/libdist-backend-aborting_constructor.so (in its constructors or a "
                         "library it needs); rebuild the plugin or remove it from ",
                         dir, "\n")));
  // The listing child died of the first crash in the core's order: the
  // constructor's, in dlopen.
  EXPECT_THAT(r.out, HasSubstr("\nNote: loading all plugins in one process crashed with SIGABRT "
                               "(Aborted), so each plugin was loaded alone"));
  EXPECT_THAT(normal.out, Not(HasSubstr("Note: ")));
  EXPECT_THAT(r.out, HasSubstr("\n  gloo: shadowed: shadowed by "));
  EXPECT_THAT(r.out, HasSubstr("\n  fixture_wrong_major: load failed: "));
  EXPECT_THAT(r.out, HasSubstr("plugin ABI 2."));

  // The healthy plugins read exactly as on this machine without the broken ones.
  for (const char* line : {"  gloo: ok", "  openmpi: ok", "  mpich: ok", "  shm: ok", "  env: ok",
                           "  file: ok", "  tcp: ok"}) {
    const std::string expected = PluginBlock(normal.out, line);
    ASSERT_FALSE(expected.empty()) << line << " not in\n" << normal.out;
    EXPECT_EQ(PluginBlock(r.out, line), expected) << line;
  }
  EXPECT_EQ(UsableSummary(r.out, "Backends: "), UsableSummary(normal.out, "Backends: "));
  EXPECT_EQ(UsableSummary(r.out, "Rendezvous: "), UsableSummary(normal.out, "Rendezvous: "));

  json normal_json = ParseJson(RunDistinfo({"--json"}));
  ProcessResult rj = RunDistinfo({"--json"}, env);
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  json j = ParseJson(rj);
  const json* crashing = FindNamed(j["backends"], "crashing_probe");
  ASSERT_NE(crashing, nullptr) << j.dump(2);
  EXPECT_EQ((*crashing)["status"], "crashed");
  EXPECT_EQ((*crashing)["usable"], false);
  EXPECT_EQ((*crashing)["path"], dir + "/libdist-backend-crashing_probe.so");
  EXPECT_EQ((*crashing)["reason"], segv_reason);
  EXPECT_TRUE((*crashing)["capabilities"].is_null());
  const json* aborting = FindNamed(j["backends"], "aborting_constructor");
  ASSERT_NE(aborting, nullptr);
  EXPECT_EQ((*aborting)["status"], "crashed");
  EXPECT_THAT((*aborting)["reason"].get<std::string>(),
              HasSubstr("SIGABRT (Aborted) while loading "));
  EXPECT_THAT(j.value("isolation_note", ""), HasSubstr("crashed with SIGABRT (Aborted)"));
  for (const char* name : {"gloo", "openmpi", "mpich", "shm"}) {
    const json* expected = FindNamed(normal_json["backends"], name);
    ASSERT_NE(expected, nullptr) << name;
    const json* got = FindNamed(j["backends"], name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(*got, *expected) << name;
  }
  for (const char* name : {"env", "file", "tcp"}) {
    const json* expected = FindNamed(normal_json["rendezvous"], name);
    ASSERT_NE(expected, nullptr) << name;
    const json* got = FindNamed(j["rendezvous"], name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(*got, *expected) << name;
  }
  EXPECT_EQ(j["config"], normal_json["config"]);

  // --require of a crashing plugin fails naming the crash; healthy ones pass.
  r = RunDistinfo({"--require=gloo,crashing_probe"}, env);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("distinfo: gloo: ok"));
  EXPECT_THAT(r.err,
              HasSubstr(absl::StrCat("distinfo: crashing_probe: crashed: ", segv_reason, "\n")));
  EXPECT_THAT(r.err, HasSubstr("--require failed: crashing_probe not usable here"));
  r = RunDistinfo({"--require=gloo,shm,tcp://"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(DistinfoTest, SelftestPassesForGloo) {
  ProcessResult r =
      RunDistinfo({"--selftest", "--selftest_backends=gloo", "--selftest_timeout=60s"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("  gloo  pass "));
  EXPECT_THAT(r.out, HasSubstr("all_reduce "));
  EXPECT_THAT(r.out, HasSubstr("broadcast "));
  EXPECT_THAT(r.out, HasSubstr("barrier "));
}

TEST(DistinfoTest, SelftestOfEveryUsableBackendAsJson) {
  ProcessResult r = RunDistinfo({"--selftest", "--json", "--selftest_timeout=60s"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  json j = ParseJson(r);
  std::map<std::string, json> results;
  for (const json& s : j["selftest"]) results[s["backend"]] = s;
  for (const char* backend : {"gloo", "openmpi", "mpich", "shm"}) {
    ASSERT_TRUE(results.count(backend)) << backend;
    const json& s = results[backend];
    EXPECT_EQ(s["result"], "pass") << s.dump(2);
    std::vector<std::string> steps;
    for (const json& step : s["steps"]) {
      steps.push_back(step["name"]);
      EXPECT_EQ(step["ok"], true);
      EXPECT_GE(step["ms"].get<double>(), 0.0);
    }
    EXPECT_EQ(steps, (std::vector<std::string>{"init", "all_reduce", "broadcast", "barrier"}));
  }
  // Each MPI build under its own implementation's launcher.
  EXPECT_THAT(results["openmpi"]["launcher"].get<std::string>(), HasSubstr("mpirun"));
  EXPECT_THAT(results["openmpi"]["launcher"].get<std::string>(),
              HasSubstr("--oversubscribe -np 2"));
  if (geteuid() == 0) {
    EXPECT_THAT(results["openmpi"]["launcher"].get<std::string>(),
                HasSubstr("--allow-run-as-root"));
  }
  EXPECT_EQ(results["mpich"]["launcher"].get<std::string>(), "mpiexec.mpich -n 2");
#if DIST_TEST_CUDA_FOUND
  if (!HaveCudaDevice()) {
    EXPECT_EQ(results["nccl"]["result"], "skip");
    EXPECT_THAT(results["nccl"]["detail"].get<std::string>(), HasSubstr("no CUDA device"));
  }
#endif
}

TEST(DistinfoTest, SelftestReportsAFailingBackend) {
  std::string dir = MakeTempDir("distinfo_failing");
  CopyFile(RunfilePath("tests/core/fixtures/libdist-backend-fixture_create_fails.so"),
           dir + "/libdist-backend-fixture_create_fails.so");
  ProcessResult r = RunDistinfo(
      {"--selftest", "--selftest_backends=fixture_create_fails,nosuch", "--selftest_timeout=30s"},
      {"DIST_PLUGIN_PATH=" + dir});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("fixture_create_fails  FAIL"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: init: "));
  EXPECT_THAT(r.out, HasSubstr("fixture comm_create fails on purpose (rank 0)"));
  EXPECT_THAT(r.out, HasSubstr("nosuch                FAIL  no such backend plugin"));
}

TEST(DistinfoTest, SelftestCatchesWrongResults) {
  std::string dir = MakeTempDir("distinfo_lazy");
  CopyFile(RunfilePath("tests/tools/libdist-backend-lazy.so"), dir + "/libdist-backend-lazy.so");
  ProcessResult r = RunDistinfo({"--selftest", "--selftest_backends=lazy", "--json"},
                                {"DIST_PLUGIN_PATH=" + dir});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  json j = ParseJson(r);
  ASSERT_EQ(j["selftest"].size(), 1u);
  const json& s = j["selftest"][0];
  EXPECT_EQ(s["result"], "fail");
  // Rank r keeps its own (r + 1) * 1 in element 0; the sum of 2 ranks is 3.
  EXPECT_THAT(s["detail"].get<std::string>(),
              HasSubstr("rank 0: all_reduce: all_reduce(sum) gave a wrong result: element 0 "
                        "is 1, expected 3"));
  EXPECT_THAT(s["detail"].get<std::string>(),
              HasSubstr("rank 1: all_reduce: all_reduce(sum) gave a wrong result: element 0 "
                        "is 2, expected 3"));
  EXPECT_EQ(s["steps"][0]["name"], "init");
  EXPECT_EQ(s["steps"][0]["ok"], true);
  EXPECT_EQ(s["steps"][1]["name"], "all_reduce");
  EXPECT_EQ(s["steps"][1]["ok"], false);
  // A wrong result does not end the test: broadcast (rank 1 keeps its -1)
  // and barrier still run.
  ASSERT_EQ(s["steps"].size(), 4u);
  EXPECT_EQ(s["steps"][2]["name"], "broadcast");
  EXPECT_EQ(s["steps"][2]["ok"], false);
  EXPECT_THAT(s["detail"].get<std::string>(),
              HasSubstr("rank 1: broadcast: broadcast(root 0) gave a wrong result: element 0 is "
                        "-1, expected -7"));
  EXPECT_EQ(s["steps"][3]["name"], "barrier");
  EXPECT_EQ(s["steps"][3]["ok"], true);
}

TEST(DistinfoTest, SelftestWithoutMpirunSaysSo) {
  ProcessResult r = RunDistinfo({"--selftest", "--selftest_backends=mpi"}, {"PATH=/nonexistent"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // "mpi" selects both builds; each names its own launcher.
  EXPECT_THAT(r.out, HasSubstr("openmpi  FAIL  cannot start mpirun: no such file or directory"));
  EXPECT_THAT(r.out, HasSubstr("put it in PATH"));
  EXPECT_THAT(r.out, HasSubstr("mpich    FAIL  cannot start mpiexec.mpich: no such file or "
                               "directory"));
  EXPECT_THAT(r.out, HasSubstr("install MPICH's mpiexec.mpich"));
}

TEST(DistinfoTest, HangingPluginProbeIsKilledAtLoadTimeoutAndListedAsHung) {
  std::string dir = MakeTempDir("distinfo_hanging");
  CopyFile(RunfilePath("tests/tools/libdist-backend-hanging_probe.so"),
           dir + "/libdist-backend-hanging_probe.so");
  ProcessResult r = RunDistinfo({"--load_timeout=1s"}, {"DIST_PLUGIN_PATH=" + dir});
  EXPECT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The listing child and then the hanging plugin's own child each get 1s.
  EXPECT_LT(r.elapsed, absl::Seconds(20));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(
                         "\n  hanging_probe: hung: still running after 1s (--load_timeout) in the "
                         "initialize or probe of ",
                         dir,
                         "/libdist-backend-hanging_probe.so, so it was killed; if a driver "
                         "or device is wedged, fix that; otherwise rebuild the plugin or remove "
                         "it from ",
                         dir, "\n")));
  EXPECT_THAT(r.out, HasSubstr("Note: loading all plugins in one process took longer than 1s "
                               "(--load_timeout), so each plugin was loaded alone"));
  EXPECT_THAT(r.out, HasSubstr("\n  gloo: ok\n"));
  EXPECT_THAT(r.out, HasSubstr("\n  shm: ok\n"));
}

TEST(DistinfoTest, HelpShowsThePublicFlagsOnly) {
  ProcessResult r = RunDistinfo({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // Debian's Abseil alone would exit 1
  EXPECT_THAT(r.out, ::testing::StartsWith("distinfo: shows what dist can do"));
  EXPECT_THAT(r.out, HasSubstr("--require"));
  EXPECT_THAT(r.out, HasSubstr("--selftest"));
  EXPECT_THAT(r.out, HasSubstr("--json"));
  EXPECT_THAT(r.out, Not(HasSubstr("--selftest_worker")));
  ProcessResult h = RunDistinfo({"-h"});
  EXPECT_EQ(h.exit_code, 0) << h.err;
  EXPECT_EQ(h.out, r.out);
}

TEST(DistinfoTest, StrayArgumentIsAUsageError) {
  ProcessResult r = RunDistinfo({"gloo"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unexpected argument 'gloo'"));
}

}  // namespace
}  // namespace dist::testing

// The loader against real fixture plugins (tests/core/fixtures): what it
// loads, what it refuses, and the message a user sees for each.
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "dist/registry.h"
#include "gtest/gtest.h"

namespace {

std::string FixtureDir() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/dist/tests/core/fixtures";
}

std::string Message(dist_error_t* error) {
  std::string text = dist_error_message(error);
  dist_error_destroy(error);
  return text;
}

const dist_plugin_info_t* Find(const std::string& name) {
  const dist_plugin_info_t* infos = nullptr;
  size_t count = 0;
  dist_error_t* error = dist_list_plugins(&infos, &count);
  EXPECT_EQ(error, nullptr) << dist_error_message(error);
  for (size_t i = 0; i < count; ++i) {
    if (name == infos[i].name) return &infos[i];
  }
  return nullptr;
}

TEST(Loader, SearchPathHasTheCoreDirectoryThenTheEnvironment) {
  const char* const* dirs = dist_plugin_search_path();
  ASSERT_NE(dirs[0], nullptr);
  EXPECT_NE(std::string(dirs[0]).find("/dist/plugins"), std::string::npos) << dirs[0];
  bool found = false;
  for (const char* const* d = dirs; *d != nullptr; ++d) {
    found = found || std::string(*d).find("tests/core/fixtures") != std::string::npos;
  }
  EXPECT_TRUE(found);
}

TEST(Loader, ListsGoodAndBrokenPluginsWithReasons) {
  const dist_plugin_info_t* good = Find("fixture_good");
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->status, DIST_PLUGIN_OK);
  EXPECT_EQ(good->abi_major, 1u);
  EXPECT_EQ(good->abi_minor, static_cast<uint32_t>(DIST_BACKEND_ABI_MINOR));
  EXPECT_STREQ(good->library_version, "fixture library 0.1");
  EXPECT_EQ(good->capabilities.device_types, 1u << DIST_DEVICE_CPU);

  const dist_plugin_info_t* old_minor = Find("fixture_old_minor");
  ASSERT_NE(old_minor, nullptr);
  EXPECT_EQ(old_minor->status, DIST_PLUGIN_OK) << old_minor->reason;
  EXPECT_EQ(old_minor->abi_minor, 0u) << "built against the frozen 1.0 headers";

  const dist_plugin_info_t* wrong = Find("fixture_wrong_major");
  ASSERT_NE(wrong, nullptr);
  EXPECT_EQ(wrong->status, DIST_PLUGIN_BAD_ABI);
  EXPECT_NE(std::string(wrong->reason)
                .find("plugin ABI 2." + std::to_string(DIST_BACKEND_ABI_MINOR) +
                      " does not match the core's ABI 1."),
            std::string::npos)
      << wrong->reason;

  const dist_plugin_info_t* v2 = Find("fixture_v2_only");
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->status, DIST_PLUGIN_BAD_ABI);
  EXPECT_NE(std::string(v2->reason).find("built for ABI major 2"), std::string::npos) << v2->reason;

  const dist_plugin_info_t* none = Find("fixture_no_entry");
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->status, DIST_PLUGIN_BAD_ABI);
  EXPECT_NE(std::string(none->reason).find("no entry symbol dist_backend_plugin_v1"),
            std::string::npos);

  const dist_plugin_info_t* missing = Find("fixture_missing_dep");
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->status, DIST_PLUGIN_LOAD_FAILED);
  EXPECT_NE(std::string(missing->reason).find("libdist-absent-dependency.so.1"), std::string::npos)
      << missing->reason;

  const dist_plugin_info_t* memory = Find("memory");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->kind, DIST_PLUGIN_RENDEZVOUS);
  ASSERT_NE(memory->schemes, nullptr);
  EXPECT_STREQ(memory->schemes[0], "memory");
}

TEST(Loader, AskingForABrokenPluginIsAHardErrorWithPathAndVersions) {
  const dist_backend_plugin_t* plugin = nullptr;
  std::string message = Message(dist_load_backend("fixture_missing_dep", &plugin));
  EXPECT_NE(message.find("cannot load backend plugin 'fixture_missing_dep'"), std::string::npos);
  EXPECT_NE(message.find(FixtureDir().substr(0, 0)), std::string::npos);
  EXPECT_NE(message.find("libdist-backend-fixture_missing_dep.so"), std::string::npos) << message;
  EXPECT_NE(message.find("cannot open shared object file"), std::string::npos) << message;
  EXPECT_NE(message.find("core ABI 1."), std::string::npos) << message;

  message = Message(dist_load_backend("fixture_wrong_major", &plugin));
  EXPECT_NE(message.find("plugin ABI 2." + std::to_string(DIST_BACKEND_ABI_MINOR)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("core ABI 1."), std::string::npos) << message;
}

TEST(Loader, UnknownNameListsWhatIsAvailableAndWhere) {
  const dist_backend_plugin_t* plugin = nullptr;
  dist_error_t* error = dist_load_backend("warp_drive", &plugin);
  EXPECT_EQ(dist_error_code(error), DIST_NOT_FOUND);
  const std::string message = Message(error);
  EXPECT_NE(message.find("unknown backend 'warp_drive'"), std::string::npos) << message;
  EXPECT_NE(message.find("fixture_good"), std::string::npos) << message;
  EXPECT_NE(message.find("tests/core/fixtures"), std::string::npos) << message;
  EXPECT_NE(message.find("DIST_PLUGIN_PATH"), std::string::npos) << message;
}

TEST(Loader, LoadsByExplicitPath) {
  const dist_backend_plugin_t* plugin = nullptr;
  const std::string path = FixtureDir() + "/libdist-backend-fixture_good.so";
  dist_error_t* error = dist_load_backend(path.c_str(), &plugin);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_STREQ(plugin->name, "fixture_good");
  error = dist_load_backend("/no/such/libdist-backend-x.so", &plugin);
  EXPECT_NE(Message(error).find("does not exist"), std::string::npos);
}

dist_init_options_t Options(const char* backend) {
  dist_init_options_t options = dist_init_options_default();
  options.backend = backend;
  options.init_method = "memory://";
  options.timeout_ms = 5000;
  return options;
}

TEST(HostApi, InitRunsCollectivesAndSubgroupsOnAGoodPlugin) {
  dist_init_options_t options = Options("fixture_good");
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_EQ(dist_rank(group), 0);
  EXPECT_EQ(dist_world_size(group), 1);
  EXPECT_STREQ(dist_backend_name(group, DIST_DEVICE_CPU), "fixture_good");
  EXPECT_EQ(dist_backend_name(group, DIST_DEVICE_CUDA), nullptr);

  float in[3] = {1.5f, -2.0f, 4.0f};
  float out[3] = {0, 0, 0};
  dist_buffer_t send = dist_make_buffer(in, 3, DIST_FLOAT32, dist_cpu());
  dist_buffer_t recv = dist_make_buffer(out, 3, DIST_FLOAT32, dist_cpu());
  error = dist_all_reduce(group, &send, &recv, DIST_SUM, nullptr);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[2], 4.0f);

  dist_work_t* work = nullptr;
  ASSERT_EQ(dist_barrier(group, &work), nullptr);
  int done = 0;
  ASSERT_EQ(dist_work_test(work, &done), nullptr);
  EXPECT_EQ(done, 1);
  dist_work_destroy(work);

  // The core validates shapes before the plugin sees them.
  dist_buffer_t short_recv = dist_make_buffer(out, 2, DIST_FLOAT32, dist_cpu());
  std::string message = Message(dist_all_gather(group, &send, &short_recv, nullptr));
  EXPECT_NE(message.find("all_gather: recv count is 2 but must be 3"), std::string::npos)
      << message;
  message = Message(dist_all_reduce(group, &send, &recv, DIST_BXOR, nullptr));
  EXPECT_NE(message.find("bitwise"), std::string::npos) << message;
  dist_buffer_t cuda = dist_make_buffer(in, 3, DIST_FLOAT32, dist_cuda(0));
  message = Message(dist_all_reduce(group, &cuda, &cuda, DIST_SUM, nullptr));
  EXPECT_NE(message.find("no backend of group 'default' takes cuda buffers"), std::string::npos)
      << message;
  message = Message(dist_send(group, &send, 0, 0, nullptr));
  EXPECT_NE(message.find("peer 0 must be another rank"), std::string::npos) << message;
  // dist_sendrecv: the core checks both halves, and a NULL buffer, before
  // any reaches the plugin (a world of one has no other rank to name).
  // The recv's checks come first (then nothing has entered the trace yet).
  message = Message(dist_sendrecv(group, &send, 0, &recv, 0, 0));
  EXPECT_NE(message.find("recv: peer 0 must be another rank"), std::string::npos) << message;
  message = Message(dist_sendrecv(group, nullptr, 1, &recv, 0, 0));
  EXPECT_NE(message.find("dist_sendrecv: send is NULL"), std::string::npos) << message;
  message = Message(dist_sendrecv(group, &send, 1, nullptr, 0, 0));
  EXPECT_NE(message.find("dist_sendrecv: recv is NULL"), std::string::npos) << message;
  message = Message(dist_sendrecv(nullptr, &send, 1, &recv, 0, 0));
  EXPECT_NE(message.find("dist_sendrecv: group is NULL"), std::string::npos) << message;

  // A stream-ordered wait is not offered by this backend.
  ASSERT_EQ(dist_barrier(group, &work), nullptr);
  message = Message(dist_work_wait_stream(work, nullptr));
  EXPECT_NE(message.find("no stream-ordered wait"), std::string::npos);
  dist_work_destroy(work);

  // Subgroup of rank 0 (the fixture has no comm_split: the core falls back).
  const int32_t ranks[] = {0};
  dist_process_group_t* sub = nullptr;
  error = dist_new_group(group, ranks, 1, &sub);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  EXPECT_EQ(dist_rank(sub), 0);
  ASSERT_EQ(dist_barrier(sub, nullptr), nullptr);
  const int32_t bad_ranks[] = {0, 5};
  dist_process_group_t* bad = nullptr;
  message = Message(dist_new_group(group, bad_ranks, 2, &bad));
  EXPECT_NE(message.find("rank 5 is outside [0, 1)"), std::string::npos) << message;
  dist_destroy(sub);

  dist_abort(group, "test abort");
  message = Message(dist_barrier(group, nullptr));
  EXPECT_NE(message.find("test abort"), std::string::npos) << message;
  dist_destroy(group);
  dist_destroy(nullptr);
}

TEST(HostApi, OldMinorPluginWorksWithThisCore) {
  dist_init_options_t options = Options("fixture_old_minor");
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  int64_t value = 7, result = 0;
  dist_buffer_t send = dist_make_buffer(&value, 1, DIST_INT64, dist_cpu());
  dist_buffer_t recv = dist_make_buffer(&result, 1, DIST_INT64, dist_cpu());
  ASSERT_EQ(dist_all_reduce(group, &send, &recv, DIST_MAX, nullptr), nullptr);
  EXPECT_EQ(result, 7);
  dist_work_t* work = nullptr;
  ASSERT_EQ(dist_barrier(group, &work), nullptr);
  // work_wait_stream was appended in 1.1: absent from this plugin's table.
  dist_error_t* no_stream = dist_work_wait_stream(work, nullptr);
  EXPECT_EQ(dist_error_code(no_stream), DIST_UNIMPLEMENTED);
  dist_error_destroy(no_stream);
  dist_work_destroy(work);
  dist_destroy(group);
}

TEST(HostApi, CreateFailureNamesTheBackend) {
  dist_init_options_t options = Options("fixture_create_fails");
  dist_process_group_t* group = nullptr;
  const std::string message = Message(dist_init(&options, &group));
  EXPECT_EQ(group, nullptr);
  EXPECT_NE(message.find("backend 'fixture_create_fails': fixture comm_create fails on purpose"),
            std::string::npos)
      << message;
}

// A plugin that lets an exception escape its C table (instead of using the
// SDK's guard) costs its host an error, not std::terminate.
TEST(HostApi, AnExceptionFromAPluginBecomesAnError) {
  dist_init_options_t options = Options("fixture_create_throws");
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(dist_error_code(error), DIST_INTERNAL);
  const std::string message = Message(error);
  EXPECT_EQ(group, nullptr);
  EXPECT_NE(message.find("dist_init: unexpected exception: fixture comm_create throws on purpose"),
            std::string::npos)
      << message;
}

TEST(HostApi, UnknownSchemeAndBackendErrors) {
  dist_init_options_t options = Options("fixture_good");
  options.init_method = "carrier-pigeon://coop";
  dist_process_group_t* group = nullptr;
  std::string message = Message(dist_init(&options, &group));
  EXPECT_NE(message.find("no rendezvous plugin handles 'carrier-pigeon://'"), std::string::npos)
      << message;
  options = Options("cuda:fixture_good");
  message = Message(dist_init(&options, &group));
  EXPECT_NE(message.find("does not take cuda buffers"), std::string::npos) << message;
}

TEST(Config, ResolvedEntriesCarryTheirSources) {
  setenv("DIST_TIMEOUT", "12s", 1);
  dist_init_options_t options = dist_init_options_default();
  options.backend = "fixture_good";
  dist_config_entry_t* entries = nullptr;
  size_t count = 0;
  dist_error_t* error = dist_resolve_config(&options, &entries, &count);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  bool saw_backend = false, saw_timeout = false;
  for (size_t i = 0; i < count; ++i) {
    const std::string key = entries[i].key;
    if (key == "backend") {
      saw_backend = true;
      EXPECT_STREQ(entries[i].source, "argument");
    }
    if (key == "timeout_ms") {
      saw_timeout = true;
      EXPECT_STREQ(entries[i].value, "12000");
      EXPECT_STREQ(entries[i].source, "environment (DIST_TIMEOUT)");
    }
  }
  EXPECT_TRUE(saw_backend && saw_timeout);
  dist_config_entries_free(entries, count);
  unsetenv("DIST_TIMEOUT");
}

}  // namespace

int main(int argc, char** argv) {
  // Before the first registry call: the loader reads the path when it scans.
  setenv("DIST_PLUGIN_PATH", FixtureDir().c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

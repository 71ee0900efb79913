// The 1.0 fixture really is a 1.0 plugin, and the current core loads it.
#include <dlfcn.h>

#include <cstddef>
#include <string>

#include "dist/backend_plugin.h"
#include "dist/registry.h"
#include "gtest/gtest.h"

namespace {

std::string FixturePath() {
  const char* dir = std::getenv("TEST_SRCDIR");
  return std::string(dir != nullptr ? dir : ".") +
         "/dist/tests/abi/libdist-backend-kvstore_v1_0.so";
}

TEST(FrozenPluginTest, TableIsTheOneOfAbi10) {
  void* handle = dlopen(FixturePath().c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto entry =
      reinterpret_cast<dist_backend_plugin_entry_fn>(dlsym(handle, DIST_BACKEND_ENTRY_SYMBOL));
  ASSERT_NE(entry, nullptr);
  const dist_backend_plugin_t* table = entry();
  EXPECT_EQ(table->abi_major, 1u);
  EXPECT_EQ(table->abi_minor, 0u);
  // 1.1 appended work_wait_stream: the 1.0 table ends right before it.
  EXPECT_EQ(table->struct_size, offsetof(dist_backend_plugin_t, work_wait_stream));
  EXPECT_LT(table->struct_size, sizeof(dist_backend_plugin_t));
}

TEST(FrozenPluginTest, CurrentCoreLoadsIt) {
  const dist_backend_plugin_t* table = nullptr;
  dist_error_t* error = dist_load_backend(FixturePath().c_str(), &table);
  ASSERT_EQ(error, nullptr) << dist_error_message(error);
  ASSERT_NE(table, nullptr);
  EXPECT_STREQ(table->name, "kvstore");
  EXPECT_EQ(table->abi_minor, 0u);
  // Whatever the core hands back, a 1.1 field beyond the plugin's table must
  // not be garbage: either the core's zero-filled copy or not readable at all.
  if (table->struct_size >= sizeof(dist_backend_plugin_t)) {
    EXPECT_EQ(table->work_wait_stream, nullptr);
  }
}

}  // namespace

// The shm plugin's probe (can this process create shared memory?) must not
// be defeated by a name another process made first: it used
// /dist-shm-probe-<pid>, which another user could create for the next pids
// and so make shm unavailable to those processes.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "dist/registry.h"
#include "gtest/gtest.h"

namespace {

TEST(ShmProbe, ANameTakenInAdvanceDoesNotMakeShmUnavailable) {
  // The name this process's probe used to take, made first.
  const std::string squatted = absl::StrCat("/dist-shm-probe-", getpid());
  const int fd = shm_open(squatted.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  const dist_backend_plugin_t* plugin = nullptr;
  dist_error_t* error = dist_load_backend("shm", &plugin);
  shm_unlink(squatted.c_str());
  EXPECT_EQ(error, nullptr) << dist_error_message(error);
  dist_error_destroy(error);
  EXPECT_NE(plugin, nullptr);
}

}  // namespace

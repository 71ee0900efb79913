#include "tests/shm/shm_suite.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dist/registry.h"
#include "gtest/gtest.h"

namespace dist_test {

const dist_backend_plugin_t* Plugin() {
  // Through the core's registry, as a host or a kit loads a backend.
  static const dist_backend_plugin_t* plugin = [] {
    const dist_backend_plugin_t* table = nullptr;
    dist_error_t* error = dist_load_backend("shm", &table);
    if (error != nullptr) {
      std::fprintf(stderr, "cannot load the shm backend: %s\n", dist_error_message(error));
      std::abort();
    }
    return table;
  }();
  return plugin;
}

dist_backend_work_t* Issue(int rank, dist_backend_op_fn op, dist_backend_comm_t* comm,
                           const dist_op_args_t& args) {
  dist_backend_work_t* work = nullptr;
  RANK_OK(rank, op(comm, &args, &work));
  return work;
}

void WaitAll(int rank, const std::vector<dist_backend_work_t*>& works, int64_t timeout_ms) {
  for (dist_backend_work_t* work : works) {
    RANK_OK(rank, Plugin()->work_wait(work, timeout_ms));
    Plugin()->work_destroy(work);
  }
}

void ExpectAllOk(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].Describe();
  }
}

dist_store_t* OpenStore(const std::string& path, int rank, int world) {
  const std::string url = absl::StrCat("file://", path, "?rank=", rank, "&world_size=", world);
  dist_rendezvous_result_t result;
  std::memset(&result, 0, sizeof(result));
  result.struct_size = sizeof(result);
  dist_error_t* error = dist_rendezvous(url.c_str(), nullptr, 30000, &result);
  if (error != nullptr) {
    std::fprintf(stderr, "rank %d: rendezvous %s failed: %s\n", rank, url.c_str(),
                 dist_error_message(error));
    std::_Exit(3);
  }
  return result.store;
}

dist_store_t* PrefixStore(const dist_store_t* base, const std::string& prefix) {
  dist_store_t* out = nullptr;
  dist_error_t* error = dist_host_api()->store_with_prefix(base, prefix.c_str(), &out);
  if (error != nullptr) {
    std::fprintf(stderr, "store_with_prefix failed: %s\n", dist_error_message(error));
    std::_Exit(3);
  }
  return out;
}

std::vector<std::string> SegmentsOf(pid_t pid) {
  std::vector<std::string> names;
  const std::string prefix = absl::StrCat("dist-shm-", pid, "-");
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* entry = readdir(dir)) {
    if (absl::StartsWith(entry->d_name, prefix)) names.push_back(entry->d_name);
  }
  closedir(dir);
  return names;
}

}  // namespace dist_test

#include "tests/shm/harness.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/registry.h"

namespace shm_test {

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

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base ? base : "/tmp", "/", name, "-", getpid());
  mkdir(dir.c_str(), 0700);
  return dir;
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

dist_error_t* CreateComm(dist_store_t* store, int rank, int world, const CommOptions& options,
                         dist_backend_comm_t** comm) {
  std::vector<dist_kv_t> kvs;
  for (const auto& [key, value] : options.options) kvs.push_back({key.c_str(), value.c_str()});
  dist_comm_config_t config;
  std::memset(&config, 0, sizeof(config));
  config.struct_size = sizeof(config);
  config.rank = rank;
  config.world_size = world;
  config.local_rank = rank;
  config.local_world_size = world;
  config.store = store;
  config.timeout_ms = options.timeout_ms;
  config.options = kvs.data();
  config.num_options = kvs.size();
  config.group_name = options.group;
  config.device_index = -1;
  return Plugin()->comm_create(&config, comm);
}

dist_error_t* RunOp(dist_backend_op_fn op, dist_backend_comm_t* comm, const dist_op_args_t& args) {
  dist_backend_work_t* work = nullptr;
  dist_error_t* error = op(comm, &args, &work);
  if (error != nullptr) return error;
  error = Plugin()->work_wait(work, 60000);
  Plugin()->work_destroy(work);
  return error;
}

dist_op_args_t Args() {
  dist_op_args_t args;
  std::memset(&args, 0, sizeof(args));
  args.struct_size = sizeof(args);
  args.send.device = dist_cpu();
  args.recv.device = dist_cpu();
  return args;
}

bool RankResult::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string RankResult::Describe() const {
  if (WIFEXITED(status)) return absl::StrCat("pid ", pid, " exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("pid ", pid, " killed by signal ", WTERMSIG(status));
  return absl::StrCat("pid ", pid, " status ", status);
}

std::vector<RankResult> RunRanks(int world, absl::Duration limit,
                                 const std::function<int(int rank)>& body,
                                 const std::function<void(const std::vector<pid_t>&)>& on_started) {
  Plugin();  // load before forking, once
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int code = body(rank);
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(code);
    }
    pids.push_back(pid);
  }
  if (on_started) on_started(pids);
  std::vector<RankResult> results(world);
  const absl::Time deadline = absl::Now() + limit;
  int left = world;
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      if (results[r].pid != 0) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        results[r].pid = pids[r];
        results[r].status = status;
        --left;
      }
    }
    if (left == 0) break;
    if (absl::Now() > deadline) {
      for (int r = 0; r < world; ++r) {
        if (results[r].pid == 0) kill(pids[r], SIGKILL);
      }
      for (int r = 0; r < world; ++r) {
        if (results[r].pid != 0) continue;
        int status = 0;
        waitpid(pids[r], &status, 0);
        results[r].pid = pids[r];
        results[r].status = status;
        std::fprintf(stderr, "rank %d (pid %d) still ran after the limit: killed\n", r, pids[r]);
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return results;
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

}  // namespace shm_test

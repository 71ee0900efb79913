#include "tests/gloo/harness.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "plugins/store/abi_store.h"
#include "plugins/store/file_store.h"

namespace gloo_test {
namespace {

void Log(dist_log_level_t level, const char* component, const char* message) {
  std::fprintf(stderr, "[%s pid %d] %d: %s\n", component, getpid(), level, message);
}

int LogEnabled(dist_log_level_t level) { return level <= DIST_LOG_WARN; }

dist_error_t* NoPrefix(const dist_store_t*, const char*, dist_store_t**) {
  return dist_error_new(DIST_UNIMPLEMENTED, "test host: store_with_prefix is not provided");
}

const dist_host_api_t kHost = {sizeof(dist_host_api_t), 1, 1, "test", Log, LogEnabled, NoPrefix};

}  // namespace

const dist_backend_plugin_t* Plugin() {
  static const dist_backend_plugin_t* plugin = [] {
    const char* srcdir = std::getenv("TEST_SRCDIR");
    const std::string path =
        absl::StrCat(srcdir ? srcdir : ".", "/dist/plugins/backends/gloo/libdist-backend-gloo.so");
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), dlerror());
      std::abort();
    }
    auto entry = reinterpret_cast<dist_backend_plugin_entry_fn>(dlsym(handle, DIST_BACKEND_ENTRY_SYMBOL));
    if (entry == nullptr) std::abort();
    const dist_backend_plugin_t* table = entry();
    if (table->initialize(&kHost) != nullptr) std::abort();
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

dist_store_t* OpenStore(const std::string& path) {
  dist::store::FileStoreOptions options;
  options.path = path;
  options.max_poll_interval = absl::Milliseconds(5);
  auto store = dist::store::FileStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "cannot open file store %s: %s\n", path.c_str(),
                 std::string(store.status().message()).c_str());
    std::_Exit(3);
  }
  return dist::store::MakeAbiStore(*std::move(store), absl::Seconds(30));
}

dist_comm_config_t Config(dist_store_t* store, int rank, int world, const CommOptions& options,
                          std::vector<dist_kv_t>* kvs) {
  for (const auto& [key, value] : options.options) kvs->push_back({key.c_str(), value.c_str()});
  dist_comm_config_t config;
  std::memset(&config, 0, sizeof(config));
  config.struct_size = sizeof(config);
  config.rank = rank;
  config.world_size = world;
  config.local_rank = rank;
  config.local_world_size = world;
  config.store = store;
  config.timeout_ms = options.timeout_ms;
  config.options = kvs->data();
  config.num_options = kvs->size();
  config.group_name = options.group;
  config.device_index = -1;
  return config;
}

dist_error_t* CreateComm(dist_store_t* store, int rank, int world, const CommOptions& options,
                         dist_backend_comm_t** comm) {
  std::vector<dist_kv_t> kvs;
  dist_comm_config_t config = Config(store, rank, world, options, &kvs);
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

dist_buffer_t Buffer(void* data, uint64_t count, dist_dtype_t dtype) {
  return dist_make_buffer(data, count, dtype, dist_cpu());
}

bool RankResult::ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string RankResult::Describe() const {
  if (WIFEXITED(status)) return absl::StrCat("pid ", pid, " exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("pid ", pid, " killed by signal ", WTERMSIG(status));
  return absl::StrCat("pid ", pid, " status ", status);
}

std::vector<RankResult> RunRanks(int world, absl::Duration limit, const std::function<int(int rank)>& body) {
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
  std::vector<RankResult> results(world);
  const absl::Time deadline = absl::Now() + limit;
  for (int rank = 0; rank < world; ++rank) {
    results[rank].pid = pids[rank];
    for (;;) {
      const pid_t done = waitpid(pids[rank], &results[rank].status, WNOHANG);
      if (done == pids[rank]) break;
      if (absl::Now() > deadline) {
        for (pid_t pid : pids) kill(pid, SIGKILL);
        waitpid(pids[rank], &results[rank].status, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  return results;
}

}  // namespace gloo_test

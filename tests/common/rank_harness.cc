#include "tests/common/rank_harness.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dist_test {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base ? base : "/tmp", "/", name, "-", getpid());
  mkdir(dir.c_str(), 0700);
  return dir;
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

dist_op_args_t SendArgs(void* data, uint64_t count, dist_dtype_t dtype, int peer, int64_t tag) {
  dist_op_args_t a = Args();
  a.send = Buffer(data, count, dtype);
  a.peer = peer;
  a.tag = tag;
  return a;
}

dist_op_args_t RecvArgs(void* data, uint64_t count, dist_dtype_t dtype, int peer, int64_t tag) {
  dist_op_args_t a = Args();
  a.recv = Buffer(data, count, dtype);
  a.peer = peer;
  a.tag = tag;
  return a;
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
  // Reap in whatever order the ranks end; one deadline bounds them all.
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
        waitpid(pids[r], &status, 0);  // SIGKILLed: returns at once
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

}  // namespace dist_test

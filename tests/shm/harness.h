// Test harness for the shm backend: loads the real plugin through the core,
// gives each rank a real file store (file:// rendezvous), and runs ranks as
// forked processes.
#ifndef DIST_TESTS_SHM_HARNESS_H_
#define DIST_TESTS_SHM_HARNESS_H_

#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "dist/backend_plugin.h"

namespace shm_test {

// The plugin under test (dlopen of //plugins/backends/shm, initialized).
const dist_backend_plugin_t* Plugin();

// A fresh directory under TEST_TMPDIR.
std::string TempDir(const std::string& name);

// Joins the file:// rendezvous at `path` (the core's dist_rendezvous, a
// real file store) and returns its store; exits the rank on failure.
dist_store_t* OpenStore(const std::string& path, int rank, int world);

// A view of `base` with `prefix` before every key (the core's helper).
dist_store_t* PrefixStore(const dist_store_t* base, const std::string& prefix);

struct CommOptions {
  int64_t timeout_ms = 20000;
  std::vector<std::pair<std::string, std::string>> options;  // "shm.slot_bytes"
  const char* group = "test";
};

// comm_create on `store`; prints the error and returns NULL on failure.
dist_error_t* CreateComm(dist_store_t* store, int rank, int world, const CommOptions& options,
                         dist_backend_comm_t** comm);

// Issues one operation and waits for it (up to 60 s).
dist_error_t* RunOp(dist_backend_op_fn op, dist_backend_comm_t* comm, const dist_op_args_t& args);

dist_op_args_t Args();

struct RankResult {
  pid_t pid = 0;
  int status = 0;  // waitpid status
  bool ok() const;
  std::string Describe() const;
};

// Forks `world` processes running body(rank) (its return value is the exit
// code) and reaps them. Processes still running after `limit` are killed.
// `on_started` (optional) sees the pids before anything is reaped.
std::vector<RankResult> RunRanks(int world, absl::Duration limit,
                                 const std::function<int(int rank)>& body,
                                 const std::function<void(const std::vector<pid_t>&)>& on_started =
                                     nullptr);

// Names under /dev/shm that a segment of a job led by `pid` would have.
std::vector<std::string> SegmentsOf(pid_t pid);

}  // namespace shm_test

// Checks inside a forked rank: print and exit the rank with failure.
#define RANK_CHECK(rank, cond)                                                     \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", (rank), __FILE__, \
                   __LINE__, #cond);                                               \
      std::fflush(stderr);                                                         \
      std::_Exit(1);                                                               \
    }                                                                              \
  } while (0)

#define RANK_OK(rank, expr)                                                               \
  do {                                                                                    \
    dist_error_t* rank_ok_error_ = (expr);                                                \
    if (rank_ok_error_ != nullptr) {                                                      \
      std::fprintf(stderr, "rank %d: %s:%d: %s failed: %s: %s\n", (rank), __FILE__,        \
                   __LINE__, #expr, dist_error_code_name(dist_error_code(rank_ok_error_)), \
                   dist_error_message(rank_ok_error_));                                   \
      std::fflush(stderr);                                                                \
      std::_Exit(1);                                                                      \
    }                                                                                     \
  } while (0)

#endif  // DIST_TESTS_SHM_HARNESS_H_

// Runs the ranks of a backend test as forked processes (real plugin, real
// store, real sockets or shared memory) and collects how each one ended,
// killing any rank still running at the limit so that no test hangs.
//
// Shared by the backend suites (tests/gloo, tests/shm). What differs between
// them lives in the suite's own library, which must define Plugin() below:
// how the plugin is loaded (its .so through the ABI entry point, or through
// the core's registry) and how a rank gets its store (a file store, or the
// core's file:// rendezvous).
#ifndef DIST_TESTS_COMMON_RANK_HARNESS_H_
#define DIST_TESTS_COMMON_RANK_HARNESS_H_

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "dist/backend_plugin.h"

namespace dist_test {

// The plugin under test, loaded and initialized once. Defined by each suite
// (one per test binary); RunRanks calls it before forking so that every rank
// inherits the loaded plugin.
const dist_backend_plugin_t* Plugin();

// A fresh directory under TEST_TMPDIR.
std::string TempDir(const std::string& name);

struct CommOptions {
  int64_t timeout_ms = 20000;
  std::vector<std::pair<std::string, std::string>> options;  // e.g. "shm.slot_bytes"
  const char* group = "test";
};

// A communicator config for `rank` of `world` on `store`, CPU only;
// `kvs` holds the options it points to.
dist_comm_config_t Config(dist_store_t* store, int rank, int world, const CommOptions& options,
                          std::vector<dist_kv_t>* kvs);

// Plugin()->comm_create with Config(...).
dist_error_t* CreateComm(dist_store_t* store, int rank, int world, const CommOptions& options,
                         dist_backend_comm_t** comm);

// Issues one operation and waits for it (up to 60 s).
dist_error_t* RunOp(dist_backend_op_fn op, dist_backend_comm_t* comm, const dist_op_args_t& args);

// Arguments with CPU buffers and everything else zero.
dist_op_args_t Args();

dist_buffer_t Buffer(void* data, uint64_t count, dist_dtype_t dtype);

// Args() for a send to, or a recv from, `peer` with `tag` (CPU buffers).
dist_op_args_t SendArgs(void* data, uint64_t count, dist_dtype_t dtype, int peer, int64_t tag);
dist_op_args_t RecvArgs(void* data, uint64_t count, dist_dtype_t dtype, int peer, int64_t tag);

struct RankResult {
  pid_t pid = 0;
  int status = 0;  // waitpid status
  bool ok() const;
  std::string Describe() const;
};

// Forks `world` processes running body(rank) (its return value is the exit
// code) and reaps them. Processes still running after `limit` are killed
// and named on stderr. `on_started` (optional) sees the pids before
// anything is reaped.
std::vector<RankResult> RunRanks(
    int world, absl::Duration limit, const std::function<int(int rank)>& body,
    const std::function<void(const std::vector<pid_t>&)>& on_started = nullptr);

}  // namespace dist_test

// Checks inside a forked rank: print and exit the rank with failure.
#define RANK_CHECK(rank, cond)                                                               \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", (rank), __FILE__, __LINE__, \
                   #cond);                                                                   \
      std::fflush(stderr);                                                                   \
      std::_Exit(1);                                                                         \
    }                                                                                        \
  } while (0)

#define RANK_OK(rank, expr)                                                                   \
  do {                                                                                        \
    dist_error_t* rank_ok_error_ = (expr);                                                    \
    if (rank_ok_error_ != nullptr) {                                                          \
      std::fprintf(stderr, "rank %d: %s:%d: %s failed: %s: %s\n", (rank), __FILE__, __LINE__, \
                   #expr, dist_error_code_name(dist_error_code(rank_ok_error_)),              \
                   dist_error_message(rank_ok_error_));                                       \
      std::fflush(stderr);                                                                    \
      std::_Exit(1);                                                                          \
    }                                                                                         \
  } while (0)

#endif  // DIST_TESTS_COMMON_RANK_HARNESS_H_

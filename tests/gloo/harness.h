// Test harness for the Gloo backend: loads the real plugin .so through its
// ABI entry point, gives ranks a real file store, and runs each rank as a
// forked process (real Gloo, real TCP sockets on loopback).
#ifndef DIST_TESTS_GLOO_HARNESS_H_
#define DIST_TESTS_GLOO_HARNESS_H_

#include <sys/types.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "dist/backend_plugin.h"

namespace gloo_test {

// The plugin under test (dlopen of //plugins/backends/gloo, initialized).
const dist_backend_plugin_t* Plugin();

// A fresh directory under TEST_TMPDIR.
std::string TempDir(const std::string& name);

// A file-backed store at `path`, shared by every process that opens it.
dist_store_t* OpenStore(const std::string& path);

struct CommOptions {
  int64_t timeout_ms = 20000;
  std::vector<std::pair<std::string, std::string>> options;
  const char* group = "test";
};

dist_comm_config_t Config(dist_store_t* store, int rank, int world, const CommOptions& options,
                          std::vector<dist_kv_t>* kvs);

dist_error_t* CreateComm(dist_store_t* store, int rank, int world, const CommOptions& options,
                         dist_backend_comm_t** comm);

// Issues one operation and waits for it (up to 60 s).
dist_error_t* RunOp(dist_backend_op_fn op, dist_backend_comm_t* comm, const dist_op_args_t& args);

// Arguments with CPU buffers and everything else zero.
dist_op_args_t Args();

dist_buffer_t Buffer(void* data, uint64_t count, dist_dtype_t dtype);

struct RankResult {
  pid_t pid = 0;
  int status = 0;  // waitpid status
  bool ok() const;
  std::string Describe() const;
};

// Forks `world` processes running body(rank) (its return value is the exit
// code) and reaps them. Processes still running after `limit` are killed.
std::vector<RankResult> RunRanks(int world, absl::Duration limit, const std::function<int(int rank)>& body);

}  // namespace gloo_test

// Checks inside a forked rank: print and exit the rank with failure.
#define RANK_CHECK(rank, cond)                                                                         \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", (rank), __FILE__, __LINE__, #cond); \
      std::fflush(stderr);                                                                             \
      std::_Exit(1);                                                                                   \
    }                                                                                                  \
  } while (0)

#define RANK_OK(rank, expr)                                                                             \
  do {                                                                                                  \
    dist_error_t* rank_ok_error_ = (expr);                                                              \
    if (rank_ok_error_ != nullptr) {                                                                    \
      std::fprintf(stderr, "rank %d: %s:%d: %s failed: %s: %s\n", (rank), __FILE__, __LINE__, #expr,   \
                   dist_error_code_name(dist_error_code(rank_ok_error_)), dist_error_message(rank_ok_error_)); \
      std::fflush(stderr);                                                                              \
      std::_Exit(1);                                                                                    \
    }                                                                                                   \
  } while (0)

#endif  // DIST_TESTS_GLOO_HARNESS_H_

// One rank's whole run: dist_init, the optional raw baseline, every case of
// the sweep, and (rank 0) the table and the output files.
#ifndef DIST_TOOLS_DISTBENCH_RUN_H_
#define DIST_TOOLS_DISTBENCH_RUN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tools/distbench/bench.h"
#include "tools/distbench/collectives.h"

namespace distbench {

// Exit codes: 0 ok, 1 a failure at run time or wrong results, 2 bad usage.
constexpr int kUsageError = 2;

// Prints "distbench: <message>" (one line) to stderr and exits with `code`.
[[noreturn]] void Fail(int code, const std::string& message);

// Everything the flags say, checked (see main.cc).
struct RunConfig {
  std::vector<const OpInfo*> ops;
  dist_dtype_t dtype = DIST_FLOAT32;
  dist_reduce_op_t redop = DIST_SUM;
  int root = 0;
  std::vector<uint64_t> sizes;  // bytes, ascending
  BenchOptions bench;           // warm-up, iterations, rounds, check, device
  std::string backend;          // "" : DIST_BACKEND / config
  std::string init_method;      // "" : DIST_INIT_METHOD / env://
  int64_t timeout_ms = 0;       // 0: DIST_TIMEOUT / default
  std::vector<std::pair<std::string, std::string>> options;  // for dist_init
  bool baseline = false;
  std::string baseline_library = "auto";
  bool ceiling = false;  // also time the loopback TCP ceiling (ceiling.h)
  bool progress = true;
  std::string csv;
  std::string json;
  std::string plot;
};

// Collective over the job. Returns the exit code (exits by itself through
// Fail on errors).
int RunRank(const RunConfig& config);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_RUN_H_

// distbench's output: the nccl-tests-style table (rank 0, stdout), CSV and
// JSON files, and reading JSON results back for plots.
#ifndef DIST_TOOLS_DISTBENCH_REPORT_H_
#define DIST_TOOLS_DISTBENCH_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/distbench/bench.h"

namespace distbench {

// Everything the header and the files say about the run.
struct RunInfo {
  std::string backend;          // "gloo"
  std::string backend_version;  // plugin version
  std::string library_version;  // "Gloo 0.5.0"
  std::string init_method;
  std::string device;  // "cpu", "cuda:0"
  std::string host;
  std::string dist_version;
  int world_size = 0;
  int warmup = 0;
  int iters = 0;
  int rounds = 0;
  bool check = false;
  bool baseline_requested = false;
  std::string baseline;          // "gloo" when it ran
  std::string baseline_library;  // "Gloo 0.5.0 (tcp transport ...)"
  std::string baseline_skipped;  // why not, when requested and not run
  std::string date;              // ISO 8601, UTC
  double init_ms_max = -1;       // dist_init, slowest rank (-1: unknown)
  double init_ms_min = -1;       // dist_init, fastest rank
  // From the moment the last rank called dist_init until the last rank
  // returned (wall clocks: exact on one host, off by the clocks' skew
  // across hosts). The slowest rank's own figure also counts its wait for
  // ranks that were started later; this one does not.
  double init_ms_after_last_call = -1;
  // The loopback TCP ceiling (--ceiling): what it measured when it ran, or
  // why it did not.
  bool ceiling_requested = false;
  std::string ceiling;
  std::string ceiling_skipped;
};

// Streams the table: the header once, a column header per operation, a line
// per measured case.
class TablePrinter {
 public:
  TablePrinter(FILE* out, const RunInfo& info) : out_(out), info_(info) {}
  void PrintHeader();
  void BeginOp(const OpInfo& op);
  void PrintRow(const Row& row);
  void PrintSkipped(const OpInfo& op, const std::string& reason);
  // The nccl-tests footer: average busbw and the total of wrong elements.
  void PrintFooter(const std::vector<Row>& rows);

 private:
  bool with_raw() const { return !info_.baseline.empty(); }
  bool with_ceiling() const { return !info_.ceiling.empty(); }

  FILE* out_;
  RunInfo info_;
};

nlohmann::json ToJson(const RunInfo& info, const std::vector<Row>& rows);
absl::Status WriteJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);
absl::Status WriteCsv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

// Reads a file WriteJson wrote; errors name the file and what is wrong.
absl::StatusOr<nlohmann::json> ReadJson(const std::string& path);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_REPORT_H_

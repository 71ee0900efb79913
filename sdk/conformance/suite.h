// dist conformance kit: the checks, written once for every backend.
//
// Every rank runs the same checks in the same order (they are collective);
// each check adds one row to the rank's report. What runs is derived from the
// plugin's declared capabilities: everything declared must work, everything
// undeclared must fail cleanly.
#ifndef DIST_SDK_CONFORMANCE_SUITE_H_
#define DIST_SDK_CONFORMANCE_SUITE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sdk/conformance/comm.h"
#include "sdk/conformance/report.h"
#include "support/device_memory.h"

namespace dist::conformance {

struct SuiteOptions {
  // Quick: the large size shrinks to quick_large_bytes and rooted
  // collectives use roots {0, W-1} instead of every rank.
  bool quick = false;
  uint64_t large_bytes = 16u << 20;
  uint64_t quick_large_bytes = 64u << 10;
  // Bound of each operation (passed to the backend) and of each wait.
  int64_t op_timeout_ms = 30000;
  // True when driving the core's host API rather than the raw table.
  bool through_core = false;
  // Sections not to run (recorded as skipped); see SectionNames().
  std::vector<std::string> skip_sections;
};

// The suite's sections, in the order they run: declared, matrix, p2p,
// barrier, async, work, subgroups, counts, errors, abort, mismatched, peer_death
// (last: its highest rank exits abruptly).
const std::vector<std::string>& SectionNames();

// One collective call of the matrix.
struct Case {
  dist_collective_t coll;
  dist_dtype_t dtype;
  std::optional<dist_reduce_op_t> op;  // reducing collectives only
  uint64_t n;                          // elements per rank block
  int32_t root = 0;
  bool in_place = false;
  uint64_t seed = 0;
};

// Runs one case on `comm` against the independent reference; OK or why not.
absl::Status RunCase(Comm& comm, dist_device_t device, const Case& c, int64_t timeout_ms);

class Suite {
 public:
  Suite(Comm& comm, const LoadedPlugin& plugin, const SuiteOptions& options, Report& report);
  void Run();

 private:
  void DeclaredEntries();
  void CollectiveMatrix();
  void PointToPoint();
  // One sendrecv of `n` elements to `dst` and from `src`, checked.
  absl::Status SendRecvOnce(dist_dtype_t dtype, uint64_t n, int32_t dst, int32_t src);
  void Barrier();
  void AsyncOrdering();
  void WorkSemantics();
  void Subgroups();
  // dist.h's per-rank-count collectives and dist_split_group (core only).
  void PerRankCounts();
  void ErrorPaths();
  void SharedRules();
  // An all_gather (or barrier, when all_gather is undeclared) on `comm`
  // whose argument block says `args_size`; checks the gathered bytes.
  absl::Status GatherCheck(Comm& comm, size_t args_size);
  void AbortCheck();
  void MismatchedCounts();
  void PeerDeath();

  // Lines the ranks up on the main communicator (a barrier, else a tiny
  // all_reduce), for checks whose steps must not overlap across ranks.
  void Sync();

  bool Declared(dist_collective_t coll) const;
  bool DeclaredDtype(dist_dtype_t dtype) const;
  uint32_t OpsOf(dist_collective_t coll) const;
  std::vector<dist_dtype_t> DeclaredDtypes() const;
  dist_dtype_t PreferredDtype() const;  // float32 if declared, else the first
  std::vector<uint64_t> Sizes(dist_collective_t coll, dist_dtype_t dtype) const;
  std::vector<int32_t> Roots() const;
  uint64_t NextSeed() { return ++seed_; }

  void Record(const std::string& check, const std::string& dtype, const std::string& op,
              const std::string& size, const absl::Status& status);
  void Skip(const std::string& check, const std::string& why);
  // Expects `coll` with `args` to fail (at start or at wait) with one of
  // `codes` (empty: any error). Returns OK or why not.
  absl::Status ExpectFailure(Comm& comm, dist_collective_t coll, const dist_op_args_t& args,
                             const std::vector<absl::StatusCode>& codes);

  Comm& comm_;
  LoadedPlugin plugin_;
  SuiteOptions options_;
  Report& report_;
  dist_device_t device_;
  uint64_t seed_ = 0;
  // Set when an operation on the main communicator never completed: later
  // checks on it would only queue behind it, so they fail at once instead.
  std::string stuck_;
};

}  // namespace dist::conformance

#endif  // DIST_SDK_CONFORMANCE_SUITE_H_

// disttrace's analysis: reads the flight recorder dumps of every rank
// (core/flight_recorder.h writes them) and finds, per group, the first
// operation where the ranks part ways.
#ifndef DIST_TOOLS_DISTTRACE_ANALYSIS_H_
#define DIST_TOOLS_DISTTRACE_ANALYSIS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace dist::trace {

struct Entry {
  uint64_t seq = 0;
  std::string op;
  std::string call;   // "all_reduce(sum, 1024 x float32)"
  std::string state;  // issued, started, completed, failed, timed_out
  std::string error;
  int64_t issued_us = 0, started_us = 0, ended_us = 0;
  bool ended() const { return ended_us != 0; }
};

// One rank's view of one group.
struct RankTrace {
  int32_t rank = -1;         // in the group
  int32_t global_rank = -1;  // names the dump file
  int64_t dumped_us = 0;
  std::string reason;
  std::vector<Entry> collectives;     // by seq
  std::vector<Entry> point_to_point;  // sends and receives, in issue order
};

struct GroupTrace {
  std::string name;
  int32_t world_size = 0;
  std::map<int32_t, RankTrace> ranks;  // ranks that left a dump
};

// Every dist-trace file in `dir`, grouped by process group.
absl::StatusOr<std::vector<GroupTrace>> LoadDumps(const std::string& dir);

// What went wrong in one group. kind: "mismatch" (ranks called different
// operations), "divergence" (some ranks never entered an operation others
// entered), "stuck" (a rank sat inside an operation the others finished or
// gave up on), "late" (a rank entered an operation after the others had
// given up), "failed" (every rank entered and it failed), "p2p_failed" (the
// collectives agree but a send or recv failed), "consistent".
struct Verdict {
  std::string group;
  std::string kind;
  uint64_t seq = 0;
  std::string op;
  std::string message;
  nlohmann::json detail;
};

Verdict Analyze(const GroupTrace& group);

}  // namespace dist::trace

#endif  // DIST_TOOLS_DISTTRACE_ANALYSIS_H_

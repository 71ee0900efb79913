// disttrace DIR: reads the flight recorder dump of every rank of a job (the
// files DIST_TRACE_DIR collects) and says, per process group, where the ranks
// part ways: the first operation some rank never entered, a mismatched call,
// a rank stuck inside an operation or arriving after the others gave up.
//
//   disttrace [--json] DIR
//
// Exit status: 0 every group consistent, 1 a problem found, 2 no dumps or
// bad usage.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/disttrace/analysis.h"

namespace {

constexpr char kUsage[] =
    "usage: disttrace [--json] DIR\n"
    "Reads the flight recorder dumps (rank-N.json) that a dist job wrote into DIR\n"
    "(DIST_TRACE_DIR) and names, for each process group, the first operation where\n"
    "the ranks diverge: a rank that never entered it, ranks that called different\n"
    "operations, a rank stuck inside it. --json prints the verdicts for scripts.\n"
    "Exit status: 0 consistent, 1 a problem found, 2 no dumps or bad usage.\n";

std::string LastLine(const dist::trace::RankTrace& trace) {
  if (trace.collectives.empty()) return "no collective recorded";
  const dist::trace::Entry& e = trace.collectives.back();
  std::string line = absl::StrCat("last: #", e.seq, " ", e.call, ", ", e.state);
  if (e.ended()) {
    absl::StrAppend(&line, absl::StrFormat(" after %.3f s", (e.ended_us - e.issued_us) / 1e6));
  }
  if (!e.error.empty()) absl::StrAppend(&line, ": ", e.error);
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  std::string dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!arg.empty() && arg[0] == '-') {
      std::fprintf(stderr, "disttrace: unknown flag %s\n%s", arg.c_str(), kUsage);
      return 2;
    } else if (dir.empty()) {
      dir = arg;
    } else {
      std::fprintf(stderr, "disttrace: one directory only (got %s and %s)\n%s", dir.c_str(),
                   arg.c_str(), kUsage);
      return 2;
    }
  }
  if (dir.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  absl::StatusOr<std::vector<dist::trace::GroupTrace>> groups = dist::trace::LoadDumps(dir);
  if (!groups.ok()) {
    std::fprintf(stderr, "disttrace: %s\n", std::string(groups.status().message()).c_str());
    return 2;
  }
  bool problem = false;
  nlohmann::json out;
  out["dir"] = dir;
  out["groups"] = nlohmann::json::array();
  for (const dist::trace::GroupTrace& group : *groups) {
    const dist::trace::Verdict verdict = dist::trace::Analyze(group);
    if (verdict.kind != "consistent") problem = true;
    if (json) {
      nlohmann::json g = verdict.detail;
      g["name"] = group.name;
      g["world_size"] = group.world_size;
      g["verdict"] = verdict.kind;
      g["seq"] = verdict.seq;
      g["op"] = verdict.op;
      g["message"] = verdict.message;
      nlohmann::json ranks = nlohmann::json::object();
      for (const auto& [rank, trace] : group.ranks) {
        nlohmann::json r;
        r["global_rank"] = trace.global_rank;
        r["reason"] = trace.reason;
        r["last"] = LastLine(trace);
        ranks[std::to_string(rank)] = r;
      }
      g["ranks"] = ranks;
      out["groups"].push_back(g);
      continue;
    }
    std::printf("%s\n", verdict.message.c_str());
    for (const auto& [rank, trace] : group.ranks) {
      std::printf("  rank %d: %s\n", rank, LastLine(trace).c_str());
    }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return problem ? 1 : 0;
}

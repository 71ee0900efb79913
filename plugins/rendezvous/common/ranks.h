// Where a process's rank and world size come from, in order of precedence:
// the caller's hints, the URL query, then the environment — torch-style
// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) first, then
// those set by Open MPI, MPICH/PMI and Slurm launchers.
#ifndef DIST_PLUGINS_RENDEZVOUS_COMMON_RANKS_H_
#define DIST_PLUGINS_RENDEZVOUS_COMMON_RANKS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dist/rendezvous_plugin.h"
#include "support/url.h"

namespace dist::rendezvous {

// The URL types of support/url.h, as every rendezvous plugin names them.
using support::Query;
using support::Url;

struct RankInfo {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;        // -1: unknown
  int local_world_size = -1;  // -1: unknown
  std::string rank_source;    // e.g. "RANK", "URL ?rank=", "hints"
  std::string world_size_source;
};

// The environment variables consulted for each field, most preferred first.
const std::vector<std::string>& RankVariables();
const std::vector<std::string>& WorldSizeVariables();
const std::vector<std::string>& LocalRankVariables();
const std::vector<std::string>& LocalWorldSizeVariables();

// Reads an integer variable; nullopt when unset, an error naming the
// variable and its value when malformed or below `min`.
absl::StatusOr<std::optional<int>> ReadIntVariable(const std::string& url, const std::string& name,
                                                   int min);

// Resolves rank, world size and local rank/size for `url` (whose query may
// carry rank, world_size, local_rank, local_world_size).
absl::StatusOr<RankInfo> ResolveRanks(const Url& url, const Query& query,
                                      const dist_rendezvous_hints_t* hints);

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_COMMON_RANKS_H_

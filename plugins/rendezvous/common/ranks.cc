#include "plugins/rendezvous/common/ranks.h"

#include <stdlib.h>

#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/rendezvous/common/plugin_support.h"
#include "support/slurm.h"

namespace dist::rendezvous {

using support::SlurmLocalWorldSize;
namespace {

constexpr int kMaxInt = std::numeric_limits<int>::max();

// The first variable of `names` that is set, parsed.
absl::StatusOr<std::optional<int>> FirstOf(const std::string& url,
                                           const std::vector<std::string>& names, int min,
                                           std::string* source) {
  for (const std::string& name : names) {
    absl::StatusOr<std::optional<int>> value = ReadIntVariable(url, name, min);
    if (!value.ok()) return value.status();
    if (value->has_value()) {
      *source = name;
      return value;
    }
  }
  return std::optional<int>();
}

std::string MissingMessage(const Url& url, const std::string& what,
                           const std::vector<std::string>& names, const std::string& query_key) {
  return absl::StrCat(url.text, ": the ", what, " is unknown: ", names[0], " is not set (nor ",
                      absl::StrJoin(names.begin() + 1, names.end(), ", "), "); set ", names[0],
                      ", add ?", query_key,
                      "=... to the URL, or "
                      "start the job with a launcher (distrun, mpirun, srun)");
}

}  // namespace

const std::vector<std::string>& RankVariables() {
  static const auto* names =
      new std::vector<std::string>{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
  return *names;
}
const std::vector<std::string>& WorldSizeVariables() {
  static const auto* names = new std::vector<std::string>{"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                                          "PMI_SIZE", "SLURM_NTASKS"};
  return *names;
}
const std::vector<std::string>& LocalRankVariables() {
  static const auto* names = new std::vector<std::string>{
      "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
  return *names;
}
const std::vector<std::string>& LocalWorldSizeVariables() {
  static const auto* names = new std::vector<std::string>{
      "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"};
  return *names;
}

absl::StatusOr<std::optional<int>> ReadIntVariable(const std::string& url, const std::string& name,
                                                   int min) {
  const char* text = getenv(name.c_str());
  if (text == nullptr) return std::optional<int>();
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < min) {
    return absl::InvalidArgumentError(absl::StrCat(
        url, ": environment variable ", name, "='", text, "' is malformed; it must be ",
        min == 0 ? "a non-negative" : "a positive", " integer"));
  }
  return std::optional<int>(value);
}

absl::StatusOr<RankInfo> ResolveRanks(const Url& url, const Query& query,
                                      const dist_rendezvous_hints_t* hints) {
  RankInfo info;
  // A joining process has no rank until the job admits it (dist_grow).
  if (Joining(hints)) {
    info.rank_source = info.world_size_source = "a joining process";
    info.world_size = 0;
    return info;
  }
  // Hints first; a negative rank or a world size below 1 means unknown.
  if (hints != nullptr) {
    if (hints->rank >= 0) {
      info.rank = hints->rank;
      info.rank_source = "the caller's hints";
    }
    if (hints->world_size > 0) {
      info.world_size = hints->world_size;
      info.world_size_source = "the caller's hints";
    }
  }
  // Then the URL.
  absl::StatusOr<std::optional<int>> q_rank = query.GetInt("rank", 0, kMaxInt - 1);
  if (!q_rank.ok()) return q_rank.status();
  absl::StatusOr<std::optional<int>> q_world = query.GetInt("world_size", 1, kMaxInt);
  if (!q_world.ok()) return q_world.status();
  absl::StatusOr<std::optional<int>> q_local = query.GetInt("local_rank", 0, kMaxInt - 1);
  if (!q_local.ok()) return q_local.status();
  absl::StatusOr<std::optional<int>> q_local_world = query.GetInt("local_world_size", 1, kMaxInt);
  if (!q_local_world.ok()) return q_local_world.status();
  if (info.rank < 0 && q_rank->has_value()) {
    info.rank = **q_rank;
    info.rank_source = "the URL's ?rank=";
  }
  if (info.world_size < 0 && q_world->has_value()) {
    info.world_size = **q_world;
    info.world_size_source = "the URL's ?world_size=";
  }
  info.local_rank = q_local->value_or(-1);
  info.local_world_size = q_local_world->value_or(-1);
  // Then the environment.
  std::string source;
  if (info.rank < 0) {
    absl::StatusOr<std::optional<int>> v = FirstOf(url.text, RankVariables(), 0, &source);
    if (!v.ok()) return v.status();
    if (!v->has_value()) {
      return absl::InvalidArgumentError(MissingMessage(url, "rank", RankVariables(), "rank"));
    }
    info.rank = **v;
    info.rank_source = source;
  }
  if (info.world_size < 0) {
    absl::StatusOr<std::optional<int>> v = FirstOf(url.text, WorldSizeVariables(), 1, &source);
    if (!v.ok()) return v.status();
    if (!v->has_value()) {
      return absl::InvalidArgumentError(
          MissingMessage(url, "world size", WorldSizeVariables(), "world_size"));
    }
    info.world_size = **v;
    info.world_size_source = source;
  }
  if (info.local_rank < 0) {
    absl::StatusOr<std::optional<int>> v = FirstOf(url.text, LocalRankVariables(), 0, &source);
    if (!v.ok()) return v.status();
    info.local_rank = v->value_or(-1);
  }
  if (info.local_world_size < 0) {
    absl::StatusOr<std::optional<int>> v = FirstOf(url.text, LocalWorldSizeVariables(), 1, &source);
    if (!v.ok()) return v.status();
    // Slurm has no variable for it, but says how many tasks each node runs.
    info.local_world_size = v->value_or(SlurmLocalWorldSize().value_or(-1));
  }
  if (info.rank >= info.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": rank ", info.rank, " (from ", info.rank_source,
                     ") is out of range for world size ", info.world_size, " (from ",
                     info.world_size_source, "); ranks are 0..", info.world_size - 1));
  }
  if (info.local_rank >= 0 && info.local_world_size > 0 &&
      info.local_rank >= info.local_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        url.text, ": local rank ", info.local_rank, " is out of range for local world size ",
        info.local_world_size, "; check LOCAL_RANK and LOCAL_WORLD_SIZE"));
  }
  return info;
}

}  // namespace dist::rendezvous

#include "missing_ranks.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dist/error.h"

namespace dist_mpi {
namespace {

// -1: the store failed.
int KeyExists(dist_store_t* store, const std::string& key) {
  const char* keys[] = {key.c_str()};
  int exists = 0;
  dist_error_t* error = store->check(store->ctx, keys, 1, &exists);
  if (error != nullptr) {
    dist_error_destroy(error);
    return -1;
  }
  return exists;
}

}  // namespace

std::string DescribeMissingRanks(dist_store_t* store, const std::string& prefix, int rank, int size,
                                 absl::Duration grace) {
  if (store == nullptr) return "which ranks are missing is unknown (no store)";
  const std::string mine = absl::StrCat(prefix, rank);
  dist_error_t* error = store->set(store->ctx, mine.c_str(), "1", 1);
  if (error != nullptr) {
    std::string why = error->message;
    dist_error_destroy(error);
    return absl::StrCat("which ranks are missing is unknown (store: ", why, ")");
  }
  const absl::Time deadline = absl::Now() + grace;
  std::vector<int> missing;
  while (true) {
    missing.clear();
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      const int exists = KeyExists(store, absl::StrCat(prefix, r));
      if (exists < 0) return "which ranks are missing is unknown (the store failed)";
      if (exists == 0) missing.push_back(r);
    }
    if (missing.empty() || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (missing.empty()) {
    return "every rank is waiting in it (the MPI transport is stalled, not a rank)";
  }
  return absl::StrCat(missing.size() == 1 ? "rank " : "ranks ", absl::StrJoin(missing, ", "),
                      missing.size() == 1 ? " has" : " have",
                      " not reached it (no report of waiting in it within ",
                      absl::FormatDuration(grace), ")");
}

}  // namespace dist_mpi

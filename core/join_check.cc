#include "core/join_check.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dist/cpp/status.hpp"
#include "dist/cpp/store.hpp"

namespace dist {
namespace {

constexpr char kPrefix[] = "dist/join/";

std::string RankKey(int rank) { return absl::StrCat(kPrefix, "rank/", rank); }

std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), " s"); }

// Lists up to a few ranks, then how many more.
std::string RankList(const std::vector<int>& ranks) {
  constexpr size_t kShown = 16;
  std::vector<int> shown(ranks.begin(), ranks.begin() + std::min(ranks.size(), kShown));
  std::string text = absl::StrJoin(shown, ", ");
  if (ranks.size() > kShown) absl::StrAppend(&text, " and ", ranks.size() - kShown, " more");
  return text;
}

}  // namespace

std::string ProcessIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, ":", getpid());
}

absl::Status RunJoinCheck(const dist_store_t* raw_store, int rank, int world_size,
                          const std::string& url, absl::Duration timeout, absl::Time deadline) {
  const StoreView store(raw_store);
  const std::string conflict_key = absl::StrCat(kPrefix, "conflict");
  const std::string me = ProcessIdentity();

  auto fail = [&](absl::Status status) -> absl::Status {
    // Tell every other rank too, so nobody waits out the timeout.
    (void)store.CompareSet(conflict_key, "", std::string(status.message()));
    return status;
  };

  // World size: the first rank to arrive sets it; everyone compares.
  absl::StatusOr<std::string> agreed =
      store.CompareSet(absl::StrCat(kPrefix, "world_size"), "",
                       absl::StrCat(world_size, " (rank ", rank, " on ", me, ")"));
  if (!agreed.ok()) return agreed.status();
  int agreed_size = 0;
  const std::string agreed_number = agreed->substr(0, agreed->find(' '));
  if (!absl::SimpleAtoi(agreed_number, &agreed_size) || agreed_size != world_size) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "rendezvous ", url, ": world size mismatch: rank ", rank, " on ", me, " has world size ",
        world_size, " but rank ", agreed->substr(agreed->find('(') + 1), " said ", agreed_number,
        "; start every rank with the same WORLD_SIZE")));
  }

  // Rank claim: exactly one process per rank.
  absl::StatusOr<std::string> owner = store.CompareSet(RankKey(rank), "", me);
  if (!owner.ok()) return owner.status();
  if (*owner != me) {
    return fail(absl::AlreadyExistsError(
        absl::StrCat("rendezvous ", url, ": rank ", rank, " claimed by two processes (", *owner,
                     " and ", me, "); give every process a unique RANK")));
  }
  // The last rank to arrive announces completion, so that every rank waits
  // on one key: the work stays linear in the world size.
  const std::string complete_key = absl::StrCat(kPrefix, "complete");
  absl::StatusOr<int64_t> arrived = store.Add(absl::StrCat(kPrefix, "arrived"), 1);
  if (!arrived.ok()) return arrived.status();
  if (*arrived == world_size) {
    // Every rank has passed both checks (a rank that failed one never
    // counts itself in): no need to wait for the key it has just set.
    return store.Set(complete_key, "1");
  }

  // Wait in slices so that a conflict reported by another rank ends the
  // wait at once.
  const absl::Duration slice = absl::Milliseconds(100);
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::Status waited = store.Wait({complete_key}, std::min(left, slice));
    if (waited.ok()) return absl::OkStatus();
    if (waited.code() != absl::StatusCode::kDeadlineExceeded) {
      return absl::Status(waited.code(), absl::StrCat("rendezvous ", url, ": ", waited.message()));
    }
    absl::StatusOr<bool> conflict = store.Check({conflict_key});
    if (conflict.ok() && *conflict) {
      absl::StatusOr<std::string> why = store.Get(conflict_key, absl::Seconds(1));
      return absl::FailedPreconditionError(
          why.ok() ? *why : absl::StrCat("rendezvous ", url, ": another rank failed to join"));
    }
  }
  absl::StatusOr<bool> conflict = store.Check({conflict_key});
  if (conflict.ok() && *conflict) {
    absl::StatusOr<std::string> why = store.Get(conflict_key, absl::Seconds(1));
    if (why.ok()) return absl::FailedPreconditionError(*why);
  }
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    absl::StatusOr<bool> present = store.Check({RankKey(r)});
    if (!present.ok()) return present.status();
    if (!*present) missing.push_back(r);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous ", url, " timed out after ", Seconds(timeout), ": ",
      world_size - static_cast<int>(missing.size()), " of ", world_size, " ranks joined, missing ",
      missing.size() == 1 ? "rank " : "ranks ", RankList(missing),
      "; check that every rank was started with the same init method"));
}

}  // namespace dist

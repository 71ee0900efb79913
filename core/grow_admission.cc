#include "core/grow_admission.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "core/join_check.h"
#include "dist/cpp/status.hpp"
#include "dist/cpp/store.hpp"

namespace dist {
namespace {

// How often waits look up from the store to ask whether to stop.
constexpr absl::Duration kSlice = absl::Milliseconds(100);
// A ticket taken whose record never came (its process died in between) is
// skipped after this, once later tickets exist.
constexpr absl::Duration kLostTicket = absl::Seconds(2);

constexpr char kWaiting[] = "waiting ";
constexpr char kAdmitted[] = "admitted ";
constexpr char kWithdrawn[] = "withdrawn";

std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), " s"); }

// "admitted <rank>\t<name>\t<prefix>".
absl::StatusOr<GrownGroup> ParseAdmission(const std::string& record, const std::string& key) {
  const std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(record).substr(sizeof(kAdmitted) - 1), '\t');
  GrownGroup grown;
  if (!absl::StartsWith(record, kAdmitted) || parts.size() != 3 ||
      !absl::SimpleAtoi(parts[0], &grown.rank) || grown.rank < 0 || parts[2].empty()) {
    return absl::DataLossError(absl::StrCat("DIST_JOIN: the store's record '", key, "' is '",
                                            record,
                                            "', not an admission; is another job "
                                            "using the same store and group name?"));
  }
  grown.name = parts[1];
  grown.prefix = parts[2];
  return grown;
}

}  // namespace

GrowAdmission::GrowAdmission(const dist_store_t* store, std::string join_prefix)
    : store_(store), join_prefix_(std::move(join_prefix)) {}

std::string GrowAdmission::TicketKey(int64_t ticket) const {
  return absl::StrCat(join_prefix_, "ticket/", ticket);
}

absl::Status GrowAdmission::Fail(const std::string& prefix, absl::Status status) const {
  (void)StoreView(store_).Set(absl::StrCat(prefix, "decision"),
                              absl::StrCat("failed ", status.message()));
  return status;
}

absl::StatusOr<GrownGroup> GrowAdmission::Join(const std::string& group,
                                               absl::Duration timeout) const {
  const StoreView store(store_);
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<int64_t> ticket = store.Add(absl::StrCat(join_prefix_, "tickets"), 1);
  if (!ticket.ok()) return ticket.status();
  const std::string key = TicketKey(*ticket);
  const std::string waiting = absl::StrCat(kWaiting, ProcessIdentity());
  DIST_RETURN_IF_ERROR(store.Set(key, waiting));

  absl::Status answered = store.Wait({absl::StrCat(key, "/answer")}, deadline - absl::Now());
  if (!answered.ok()) {
    if (answered.code() != absl::StatusCode::kDeadlineExceeded) return answered;
    // Give the ticket back, unless a grow admitted it at this very moment.
    absl::StatusOr<std::string> after = store.CompareSet(key, waiting, kWithdrawn);
    if (!after.ok()) return after.status();
    if (*after == kWithdrawn) {
      return absl::DeadlineExceededError(absl::StrCat(
          "DIST_JOIN: no rank of group '", group, "' admitted this process (ticket ", *ticket,
          ") within ", Seconds(timeout),
          "; the job's ranks admit joining processes with dist_grow (distrun --max-restarts "
          "restarts a failed rank this way), and the joiner must use the job's store and group "
          "name"));
    }
  }
  absl::StatusOr<std::string> record = store.Get(key, kSlice);
  if (!record.ok()) return record.status();
  absl::StatusOr<GrownGroup> grown = ParseAdmission(*record, key);
  if (!grown.ok()) return grown.status();
  // Admitted: the decision follows at once unless the grow fails, which
  // its rank 0 then publishes.
  absl::StatusOr<int32_t> world =
      AwaitDecision(grown->prefix, grown->name, absl::Now() + timeout, nullptr);
  if (!world.ok()) return world.status();
  grown->world_size = *world;
  return grown;
}

absl::StatusOr<int32_t> GrowAdmission::Admit(const GrownGroup& grown, int32_t world_size,
                                             int32_t joiners, absl::Duration timeout,
                                             const Interrupted& interrupted) const {
  const StoreView store(store_);
  const absl::Time deadline = absl::Now() + timeout;
  const std::string considered_key = absl::StrCat(join_prefix_, "considered");
  int64_t considered = 0;
  absl::StatusOr<bool> any = store.Check({considered_key});
  if (!any.ok()) return Fail(grown.prefix, any.status());
  if (*any) {
    absl::StatusOr<std::string> text = store.Get(considered_key, kSlice);
    if (!text.ok()) return Fail(grown.prefix, text.status());
    if (!absl::SimpleAtoi(*text, &considered) || considered < 0) {
      return Fail(grown.prefix, absl::DataLossError(absl::StrCat(
                                    "dist_grow on group '", grown.name, "': the store's record '",
                                    considered_key, "' is '", *text, "', not a ticket number")));
    }
  }
  int32_t admitted = 0;
  int64_t next = considered + 1;
  absl::Time missing_since = absl::InfiniteFuture();
  while (true) {
    if (interrupted) {
      if (absl::Status stop = interrupted(); !stop.ok()) return Fail(grown.prefix, stop);
    }
    const std::string key = TicketKey(next);
    absl::StatusOr<bool> present = store.Check({key});
    if (!present.ok()) return Fail(grown.prefix, present.status());
    bool decided = false;
    if (*present) {
      absl::StatusOr<std::string> record = store.Get(key, kSlice);
      if (!record.ok()) return Fail(grown.prefix, record.status());
      if (absl::StartsWith(*record, kWaiting)) {
        const std::string admission =
            absl::StrCat(kAdmitted, world_size + admitted, "\t", grown.name, "\t", grown.prefix);
        absl::StatusOr<std::string> after = store.CompareSet(key, *record, admission);
        if (!after.ok()) return Fail(grown.prefix, after.status());
        if (*after == admission) {
          absl::Status answered = store.Set(absl::StrCat(key, "/answer"), "1");
          if (!answered.ok()) return Fail(grown.prefix, answered);
          ++admitted;
        }
      }
      decided = true;  // admitted, or withdrawn: either way done with
    } else {
      // A ticket taken whose record never came: skip it once later ones exist.
      absl::StatusOr<int64_t> taken = store.Add(absl::StrCat(join_prefix_, "tickets"), 0);
      if (!taken.ok()) return Fail(grown.prefix, taken.status());
      if (*taken > next) {
        const absl::Time now = absl::Now();
        missing_since = std::min(missing_since, now);
        decided = now - missing_since > kLostTicket;
      }
    }
    if (decided) {
      absl::Status noted = store.Set(considered_key, absl::StrCat(next));
      if (!noted.ok()) return Fail(grown.prefix, noted);
      ++next;
      missing_since = absl::InfiniteFuture();
      if (joiners > 0 && admitted == joiners) break;
      continue;
    }
    if (joiners == 0 && admitted > 0) break;  // every one waiting now
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return Fail(
          grown.prefix,
          absl::DeadlineExceededError(absl::StrCat(
              "dist_grow on group '", grown.name, "': within ", Seconds(timeout), " ",
              joiners > 0 ? absl::StrCat("only ", admitted, " of ", joiners) : std::string("no"),
              " joining processes asked to join; start them with DIST_JOIN=1 and the "
              "job's init method and group name (distrun --max-restarts does)")));
    }
    absl::Status waited = store.Wait({key}, std::min(left, kSlice));
    if (!waited.ok() && waited.code() != absl::StatusCode::kDeadlineExceeded) {
      return Fail(grown.prefix, waited);
    }
  }
  const int32_t grown_size = world_size + admitted;
  DIST_RETURN_IF_ERROR(
      store.Set(absl::StrCat(grown.prefix, "decision"), absl::StrCat("ok ", grown_size)));
  return grown_size;
}

absl::StatusOr<int32_t> GrowAdmission::AwaitDecision(const std::string& prefix,
                                                     const std::string& group, absl::Time deadline,
                                                     const Interrupted& interrupted) const {
  const StoreView store(store_);
  const std::string key = absl::StrCat(prefix, "decision");
  while (true) {
    if (interrupted) DIST_RETURN_IF_ERROR(interrupted());
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("dist_grow of group '", group,
                       "': its rank 0 did not decide which joiners to admit in time (it may "
                       "have failed; the members shrink, then grow again)"));
    }
    absl::Status waited = store.Wait({key}, std::min(left, kSlice));
    if (waited.ok()) break;
    if (waited.code() != absl::StatusCode::kDeadlineExceeded) return waited;
  }
  absl::StatusOr<std::string> decision = store.Get(key, kSlice);
  if (!decision.ok()) return decision.status();
  int32_t world = 0;
  if (absl::StartsWith(*decision, "ok ") && absl::SimpleAtoi(decision->substr(3), &world) &&
      world > 0) {
    return world;
  }
  if (absl::StartsWith(*decision, "failed ")) {
    return absl::AbortedError(absl::StrCat("dist_grow of group '", group,
                                           "' failed on its rank 0: ", decision->substr(7)));
  }
  return absl::DataLossError(absl::StrCat("dist_grow of group '", group, "': the store's record '",
                                          key, "' is '", *decision, "', not a decision"));
}

}  // namespace dist

// dist plugin helper: ranks that fail compare notes through the
// communicator's store, so an error can say which rank is to blame.
//
// A timeout names no one by itself: every live rank stuck in the same
// operation times out too, while a dead, stalled or desynchronized rank
// never does. So each failing rank publishes a one-line report; the first
// report in the group is kept; and a rank can wait a short grace period for
// the others' reports and name the ranks that sent none.
//
//   FailureNotes notes(StoreView(config.store), "mybackend/", rank, size);
//   std::string first = notes.Publish("rank 2: all_reduce #7 timed out");
//   absl::StatusOr<std::vector<int>> silent = notes.Unresponsive(absl::Seconds(2));
//
// Best effort: a store error never replaces the caller's own error, and
// once the store has failed (its host may be the rank that died) no more
// round trips are spent on it. Only for failure paths: each call costs a
// few store round trips.
#ifndef DIST_CPP_FAILURE_NOTES_HPP_
#define DIST_CPP_FAILURE_NOTES_HPP_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"

namespace dist {

class FailureNotes {
 public:
  // Keys go under `prefix` ("mybackend/") in `store`, which is namespaced
  // for one communicator.
  FailureNotes(const StoreView& store, std::string prefix, int rank, int size)
      : store_(store), prefix_(std::move(prefix)), rank_(rank), size_(size) {}

  // Publishes this rank's report. Returns the group's first failure when it
  // is another rank's (and that rank's report), else "".
  std::string Publish(const std::string& report) {
    absl::StatusOr<std::string> first = store_.CompareSet(Key("first_failure"), "", report);
    if (!first.ok()) {
      store_error_ = first.status();
      return "";
    }
    (void)store_.Set(FailedKey(rank_), report);
    return *first != report ? *first : "";
  }

  // Waits up to `grace` for every other rank's report; returns the ranks
  // that sent none (dead, stuck, or not in this operation), and records
  // them for RecordedUnresponsive. An error when the store cannot tell.
  absl::StatusOr<std::vector<int>> Unresponsive(absl::Duration grace) {
    if (!store_error_.ok()) return store_error_;
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) keys.push_back(FailedKey(r));
    }
    const absl::Status waited = store_.Wait(keys, grace);
    if (!waited.ok() && !absl::IsDeadlineExceeded(waited)) return store_error_ = waited;
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      absl::StatusOr<bool> present = store_.Check({FailedKey(r)});
      if (!present.ok()) return store_error_ = present.status();
      if (!*present) missing.push_back(r);
    }
    if (!missing.empty()) (void)store_.Set(Key("unresponsive"), absl::StrJoin(missing, ","));
    return missing;
  }

  // Rank `rank`'s report, waiting up to `grace` for it.
  absl::StatusOr<std::string> ReportOf(int rank, absl::Duration grace) const {
    if (!store_error_.ok()) return store_error_;
    return store_.Get(FailedKey(rank), grace);
  }

  // The list Unresponsive recorded on some rank ("3" or "1,3"), waiting up
  // to `grace` for it.
  absl::StatusOr<std::string> RecordedUnresponsive(absl::Duration grace) const {
    if (!store_error_.ok()) return store_error_;
    return store_.Get(Key("unresponsive"), grace);
  }

 private:
  std::string Key(const char* name) const { return absl::StrCat(prefix_, name); }
  std::string FailedKey(int rank) const { return absl::StrCat(prefix_, "failed/", rank); }

  StoreView store_;
  std::string prefix_;
  int rank_;
  int size_;
  absl::Status store_error_;  // the first store failure; then no more calls
};

}  // namespace dist

#endif  // DIST_CPP_FAILURE_NOTES_HPP_

#include "plugins/backends/gloo/failure.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dist/cpp/failure_notes.hpp"

namespace dist_gloo {
namespace {

std::string StripLocation(const std::string& what) {
  // Gloo prefixes "[./gloo/transport/tcp/pair.cc:598] ".
  if (!what.empty() && what[0] == '[') {
    const size_t end = what.find("] ");
    if (end != std::string::npos && what.find(':') < end) return what.substr(end + 2);
  }
  return what;
}

bool EndsAddress(const std::string& text, size_t end) {
  return end == text.size() || !(text[end] >= '0' && text[end] <= '9');
}

}  // namespace

std::string GlooFailure::Describe() const {
  if (mismatched) {
    return absl::StrCat(
        "received data for an operation this rank is not running; check that all ranks issue "
        "the same operations in the same order with the same count, dtype, op and root");
  }
  if (peer >= 0) return absl::StrCat("lost the connection to rank ", peer, " (", what, ")");
  if (timed_out) return absl::StrCat("timed out (", what, ")");
  return what;
}

GlooFailure ClassifyGlooError(const std::string& what,
                              const std::vector<std::string>& peer_addresses) {
  GlooFailure failure;
  failure.what = StripLocation(what);
  for (size_t rank = 0; rank < peer_addresses.size(); ++rank) {
    const std::string& address = peer_addresses[rank];
    if (address.empty()) continue;
    // "[127.0.0.1]:4123" must not match inside "[127.0.0.1]:41234".
    for (size_t at = failure.what.find(address); at != std::string::npos;
         at = failure.what.find(address, at + 1)) {
      if (EndsAddress(failure.what, at + address.size())) {
        failure.peer = static_cast<int>(rank);
        break;
      }
    }
    if (failure.peer >= 0) break;
  }
  // A synchronous pair (sync_mesh.h) that reads a message for a slot no
  // buffer of this rank has: the peer is in another operation (the slots
  // come from what must agree, bound_algorithms.h). Gloo's words for it:
  failure.mismatched = absl::StrContains(failure.what, "read() returned false in sync mode");
  const std::string lower = absl::AsciiStrToLower(failure.what);
  failure.timed_out = absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout");
  // A bound buffer's wait that runs out says "Read timeout [peer]": the
  // peer it waited on, which may itself be waiting on the rank that is
  // really stuck (a ring passes the wait along). So a timeout names no one
  // here; comparing notes finds the ranks that never reported.
  if (failure.timed_out) failure.peer = -1;
  // UNAVAILABLE even for a timeout: work_wait answers DEADLINE_EXCEEDED
  // for "still pending", and a finished operation must not look pending.
  failure.code = absl::StatusCode::kUnavailable;
  return failure;
}

std::string CompareNotes(const dist::StoreView& store, int rank, int size,
                         const GlooFailure& failure, const std::string& report,
                         absl::Duration grace, const std::function<bool()>& cancelled) {
  dist::FailureNotes notes(store, "dist_gloo/", rank, size);
  std::string text;
  const std::string first = notes.Publish(report);
  if (!first.empty()) absl::StrAppend(&text, "; first failure in the group: ", first);

  if (failure.timed_out && failure.peer < 0) {
    // Who else noticed? A rank that never reports is dead, stuck, or not
    // calling this operation.
    const absl::StatusOr<std::vector<int>> unresponsive = notes.Unresponsive(grace);
    const std::vector<int> missing = unresponsive.ok() ? *unresponsive : std::vector<int>();
    if (!unresponsive.ok()) {
      absl::StrAppend(&text, "; the ranks could not compare notes (store: ",
                      unresponsive.status().message(), ")");
    } else if (missing.empty()) {
      absl::StrAppend(
          &text,
          "; every rank timed out: check that all ranks issue the same operations in the same "
          "order with the same count, dtype, op and root");
    } else {
      absl::StrAppend(&text, "; ranks that reported no failure within ",
                      absl::FormatDuration(grace), ": ", absl::StrJoin(missing, ","),
                      " (dead, stuck, or not calling this operation)");
    }
  } else if (failure.peer >= 0) {
    // A peer may close the connection because it timed out in this very
    // operation: then both ranks were in it and did not match (count, dtype,
    // op or root). Say so, rather than only "lost the connection". A peer
    // that died reports nothing and costs one short grace period here.
    // Asked in slices, so that an abort meanwhile (a revoke) ends the wait.
    const absl::Time until = absl::Now() + grace;
    absl::StatusOr<std::string> peer_report = absl::DeadlineExceededError("");
    for (;;) {
      const absl::Duration left = until - absl::Now();
      peer_report = notes.ReportOf(
          failure.peer, std::max(std::min(left, absl::Milliseconds(20)), absl::Milliseconds(1)));
      if (peer_report.ok() || left <= absl::ZeroDuration() || cancelled()) break;
      if (peer_report.status().code() != absl::StatusCode::kDeadlineExceeded) break;
    }
    if (peer_report.ok() && absl::StrContains(*peer_report, "timed out")) {
      absl::StrAppend(
          &text, "; rank ", failure.peer,
          " timed out in this operation: check that all ranks issue the same operations "
          "in the same order with the same count, dtype, op and root");
    }
  } else if (!first.empty() && absl::StrContains(first, "timed out")) {
    // The first failure was a timeout on another rank, which is now
    // finding out who did not respond.
    absl::StatusOr<std::string> list = notes.RecordedUnresponsive(grace);
    if (list.ok()) absl::StrAppend(&text, "; ranks not responding: ", *list);
  }
  return text;
}

}  // namespace dist_gloo

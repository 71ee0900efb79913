#include "core/collective_check.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dist/cpp/status.hpp"
#include "dist/cpp/store.hpp"

namespace dist {
namespace {

constexpr char kOk[] = "ok";
constexpr char kGaveUp[] = "gave up: ";  // prefix of the mark a rank that timed out leaves

std::string RankList(const std::vector<int32_t>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ","));
}

}  // namespace

std::string EncodeFingerprint(const OpFingerprint& fp) {
  return absl::StrCat("1|", static_cast<int>(fp.op), "|", static_cast<int>(fp.dtype), "|", fp.count,
                      "|", static_cast<int>(fp.reduce), "|", fp.root, "|", fp.peer, "|", fp.tag,
                      "|", static_cast<int>(fp.device));
}

bool DecodeFingerprint(const std::string& text, OpFingerprint* fp) {
  const std::vector<std::string> parts = absl::StrSplit(text, '|');
  int op = 0, dtype = 0, reduce = 0, device = 0;
  if (parts.size() != 9 || parts[0] != "1" || !absl::SimpleAtoi(parts[1], &op) ||
      !absl::SimpleAtoi(parts[2], &dtype) || !absl::SimpleAtoi(parts[3], &fp->count) ||
      !absl::SimpleAtoi(parts[4], &reduce) || !absl::SimpleAtoi(parts[5], &fp->root) ||
      !absl::SimpleAtoi(parts[6], &fp->peer) || !absl::SimpleAtoi(parts[7], &fp->tag) ||
      !absl::SimpleAtoi(parts[8], &device) || op < 0 || op >= DIST_COLLECTIVE_COUNT || dtype < 0 ||
      dtype >= DIST_DTYPE_COUNT || reduce < 0 || reduce >= DIST_REDUCE_OP_COUNT || device < 0 ||
      device >= DIST_DEVICE_TYPE_COUNT) {
    return false;
  }
  fp->op = static_cast<dist_collective_t>(op);
  fp->dtype = static_cast<dist_dtype_t>(dtype);
  fp->reduce = static_cast<dist_reduce_op_t>(reduce);
  fp->device = static_cast<dist_device_type_t>(device);
  return true;
}

namespace {
std::string DescribeEncoded(const std::string& text) {
  OpFingerprint fp;
  return DecodeFingerprint(text, &fp) ? DescribeOp(fp) : absl::StrCat("'", text, "'");
}
}  // namespace

CollectiveCheck::CollectiveCheck(dist_store_t* store, std::string group, int32_t rank,
                                 int32_t world_size, absl::Duration timeout)
    : store_(store),
      group_(std::move(group)),
      rank_(rank),
      world_size_(world_size),
      timeout_(timeout) {}

CollectiveCheck::~CollectiveCheck() { store_->release(store_->ctx); }

std::string CollectiveCheck::SlotKey(uint64_t seq, int32_t rank) const {
  return absl::StrCat("r", rank, "/", seq % 2);
}

absl::StatusOr<std::string> CollectiveCheck::ReadSlot(uint64_t seq, int32_t rank) {
  StoreView store(store_);
  absl::StatusOr<bool> there = store.Check({SlotKey(seq, rank)});
  if (!there.ok()) return there.status();
  if (!*there) return absl::NotFoundError("no fingerprint");
  absl::StatusOr<std::string> value = store.Get(SlotKey(seq, rank), timeout_);
  if (!value.ok()) return value.status();
  const std::string prefix = absl::StrCat(seq, ":");
  if (!absl::StartsWith(*value, prefix)) return absl::NotFoundError("an older fingerprint");
  return value->substr(prefix.size());
}

std::string CollectiveCheck::Compare(uint64_t seq) {
  // Fingerprints in rank order, grouped by value.
  std::vector<std::pair<std::string, std::vector<int32_t>>> calls;
  for (int32_t r = 0; r < world_size_; ++r) {
    absl::StatusOr<std::string> value = ReadSlot(seq, r);
    const std::string text =
        value.ok() ? *value : absl::StrCat("unreadable: ", value.status().message());
    auto it = std::find_if(calls.begin(), calls.end(),
                           [&](const auto& call) { return call.first == text; });
    if (it == calls.end()) {
      calls.push_back({text, {r}});
    } else {
      it->second.push_back(r);
    }
  }
  if (calls.size() == 1) return kOk;
  // The largest group (the lowest rank breaks ties) is "what the others called".
  std::stable_sort(calls.begin(), calls.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::vector<std::string> odd;
  for (size_t i = 1; i < calls.size(); ++i) {
    odd.push_back(
        absl::StrCat(RankList(calls[i].second), " called ", DescribeEncoded(calls[i].first)));
  }
  OpFingerprint majority;
  const std::string op = DecodeFingerprint(calls[0].first, &majority)
                             ? dist_collective_name(majority.op)
                             : "operation";
  return absl::StrCat(op, " #", seq, " on group '", group_, "': ", absl::StrJoin(odd, ", "),
                      " where ", RankList(calls[0].second), " called ",
                      DescribeEncoded(calls[0].first),
                      "; no rank ran it (DIST_DEBUG=detail); make every rank issue the same "
                      "operations in the same order");
}

absl::Status CollectiveCheck::Check(uint64_t seq, const OpFingerprint& fp) {
  StoreView store(store_);
  const std::string base = absl::StrCat("c", seq, "/");
  auto store_failed = [&](const absl::Status& status) {
    return absl::UnavailableError(
        absl::StrCat(dist_collective_name(fp.op), " #", seq, " on group '", group_,
                     "': the fingerprint check (DIST_DEBUG=detail) could not use the store: ",
                     status.message()));
  };
  const std::string mine = EncodeFingerprint(fp);
  // This rank's slot (for the messages; overwritten two operations later,
  // when every rank is past this one), then the first fingerprint of the
  // operation becomes the reference every later one is compared with.
  absl::Status status = store.Set(SlotKey(seq, rank_), absl::StrCat(seq, ":", mine));
  if (!status.ok()) return store_failed(status);
  absl::StatusOr<std::string> reference = store.CompareSet(absl::StrCat(base, "ref"), "", mine);
  if (!reference.ok()) return store_failed(reference.status());
  const bool differs = *reference != mine;
  // Low 32 bits count the arrivals, high ones the ranks that differ.
  absl::StatusOr<int64_t> arrived =
      store.Add(absl::StrCat(base, "n"), 1 + (differs ? (int64_t{1} << 32) : 0));
  if (!arrived.ok()) return store_failed(arrived.status());
  const bool last = (*arrived & 0xffffffff) == world_size_;
  const std::string done = absl::StrCat(base, "done");
  absl::StatusOr<std::string> verdict;
  if (last) {
    // Everyone is here, so every rank has finished the check of seq - 1 and
    // its verdict is no longer read. Only a mismatch costs reading every
    // fingerprint. The verdict goes in only if no rank gave up waiting
    // meanwhile (compare_set), so all ranks agree on it.
    verdict = store.CompareSet(done, "", (*arrived >> 32) == 0 ? kOk : Compare(seq));
    if (!verdict.ok()) return store_failed(verdict.status());
    store.Remove(absl::StrCat(base, "n")).IgnoreError();
    store.Remove(absl::StrCat(base, "ref")).IgnoreError();
    if (seq > 1) store.Remove(absl::StrCat("c", seq - 1, "/done")).IgnoreError();
  } else {
    verdict = store.Get(done, timeout_);
  }
  if (!verdict.ok() && verdict.status().code() != absl::StatusCode::kDeadlineExceeded) {
    return store_failed(verdict.status());
  }
  if (!verdict.ok()) {
    // Give up, unless the verdict arrived just now: a rank that comes later
    // then finds the mark and fails at once instead of running alone.
    std::vector<int32_t> missing, present;
    for (int32_t r = 0; r < world_size_; ++r) {
      (ReadSlot(seq, r).ok() ? present : missing).push_back(r);
    }
    const std::string message =
        missing.empty()
            ? absl::StrCat(dist_collective_name(fp.op), " #", seq, " on group '", group_,
                           "': every rank arrived but the fingerprint comparison did not finish "
                           "within ",
                           absl::FormatDuration(timeout_),
                           " (DIST_DEBUG=detail); the rank comparing stalled")
            : absl::StrCat(
                  dist_collective_name(fp.op), " #", seq, " on group '", group_,
                  "': ", RankList(missing), " did not reach it within ",
                  absl::FormatDuration(timeout_), " (", RankList(present), " did, calling ",
                  DescribeOp(fp), "); ",
                  missing.size() == 1 ? "it skipped this call, is" : "they skipped this call, are",
                  " stuck in an earlier one, or exited (DIST_DEBUG=detail)");
    verdict = store.CompareSet(done, "", absl::StrCat(kGaveUp, message));
    if (!verdict.ok()) return store_failed(verdict.status());
    if (absl::StartsWith(*verdict, kGaveUp)) return absl::DeadlineExceededError(message);
  }
  if (absl::StartsWith(*verdict, kGaveUp)) {
    const absl::string_view reason = absl::string_view(*verdict).substr(sizeof(kGaveUp) - 1);
    // A rank still waiting shares the verdict of the one that gave up first.
    if (!last) return absl::DeadlineExceededError(reason);
    return absl::DeadlineExceededError(
        absl::StrCat(dist_collective_name(fp.op), " #", seq, " on group '", group_, "': rank ",
                     rank_, " arrived after the others had given up waiting for it: ", reason));
  }
  if (*verdict != kOk) return absl::InvalidArgumentError(*verdict);
  return absl::OkStatus();
}

std::string CollectiveCheck::PairKey(const OpFingerprint& fp, uint64_t pairing, bool mine) const {
  const bool send = fp.op == DIST_COLL_SEND;
  const int32_t source = send ? rank_ : fp.peer;
  const int32_t destination = send ? fp.peer : rank_;
  // "s": what the sender posted, "r": the receiver.
  return absl::StrCat("p", source, "-", destination, "-t", fp.tag, "/", pairing, "/",
                      send == mine ? "s" : "r");
}

absl::StatusOr<uint64_t> CollectiveCheck::CheckPeer(const OpFingerprint& fp) {
  uint64_t pairing = 0;
  {
    absl::MutexLock lock(&mu_);
    pairing = ++pairings_[{fp.peer, fp.tag, fp.op == DIST_COLL_SEND}];
  }
  StoreView store(store_);
  const std::string mine = PairKey(fp, pairing, true);
  const std::string theirs = PairKey(fp, pairing, false);
  DIST_RETURN_IF_ERROR(store.Set(mine, EncodeFingerprint(fp)));
  absl::StatusOr<bool> there = store.Check({theirs});
  if (!there.ok() || !*there) return pairing;  // the peer checks when it arrives
  absl::StatusOr<std::string> value = store.Get(theirs, timeout_);
  if (!value.ok()) return pairing;
  OpFingerprint peer;
  if (DecodeFingerprint(*value, &peer) && peer.count == fp.count && peer.dtype == fp.dtype) {
    store.Remove(mine).IgnoreError();
    store.Remove(theirs).IgnoreError();
    return pairing;
  }
  // Both stay: the peer, already inside the backend, quotes them when it fails.
  return absl::InvalidArgumentError(absl::StrCat(
      dist_collective_name(fp.op), " #", pairing, " between ranks ", rank_, " and ", fp.peer,
      " on group '", group_, "': rank ", rank_, " called ", DescribeOp(fp), " where rank ", fp.peer,
      " called ", DescribeEncoded(*value),
      " (DIST_DEBUG=detail); make the counts and dtypes of each send and its recv agree"));
}

std::string CollectiveCheck::ExplainPeer(uint64_t pairing, const OpFingerprint& fp) {
  StoreView store(store_);
  const std::string theirs = PairKey(fp, pairing, false);
  absl::StatusOr<bool> there = store.Check({theirs});
  if (!there.ok()) return "";
  const char* verb = fp.op == DIST_COLL_SEND ? "recv" : "send";
  if (!*there) {
    return absl::StrCat("; rank ", fp.peer, " has not posted the matching ", verb, " #", pairing,
                        " (tag ", fp.tag, ") (DIST_DEBUG=detail)");
  }
  absl::StatusOr<std::string> value = store.Get(theirs, absl::Seconds(1));
  if (!value.ok()) return "";
  return absl::StrCat("; rank ", fp.peer, " posted ", DescribeEncoded(*value), " as the matching ",
                      verb, " #", pairing, " (DIST_DEBUG=detail)");
}

}  // namespace dist

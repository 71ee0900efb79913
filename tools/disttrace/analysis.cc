#include "tools/disttrace/analysis.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dist::trace {
namespace {

std::string RankList(const std::vector<int32_t>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ","));
}

std::string Seconds(int64_t micros) { return absl::StrFormat("%.1f s", micros / 1e6); }

const Entry* Find(const RankTrace& trace, uint64_t seq) {
  auto it = std::lower_bound(trace.collectives.begin(), trace.collectives.end(), seq,
                             [](const Entry& e, uint64_t s) { return e.seq < s; });
  return it != trace.collectives.end() && it->seq == seq ? &*it : nullptr;
}

std::string Describe(const Entry& entry) {
  return absl::StrCat(entry.op, " #", entry.seq, ", ", entry.state);
}

// "its last operation: broadcast #2, completed" for a rank that stopped
// before `seq`.
std::string LastBefore(const RankTrace& trace, uint64_t seq) {
  const Entry* last = nullptr;
  for (const Entry& e : trace.collectives) {
    if (e.seq < seq) last = &e;
  }
  return last == nullptr ? "it recorded no operation"
                         : absl::StrCat("its last operation: ", Describe(*last));
}

}  // namespace

absl::StatusOr<std::vector<GroupTrace>> LoadDumps(const std::string& dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) {
    return absl::NotFoundError(absl::StrCat("cannot read ", dir, ": ", error.message(),
                                            "; pass the DIST_TRACE_DIR of the job"));
  }
  std::map<std::string, GroupTrace> groups;
  for (const auto& file : it) {
    if (file.path().extension() != ".json") continue;
    std::ifstream in(file.path());
    nlohmann::json dump = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (dump.is_discarded() || !dump.is_object() || dump.value("format", "") != "dist-trace") {
      continue;
    }
    try {
      for (const nlohmann::json& g : dump.at("groups")) {
        GroupTrace& group = groups[g.at("name").get<std::string>()];
        group.name = g.at("name").get<std::string>();
        group.world_size = std::max(group.world_size, g.at("world_size").get<int32_t>());
        RankTrace trace;
        trace.rank = g.at("rank").get<int32_t>();
        trace.global_rank = dump.at("rank").get<int32_t>();
        trace.dumped_us = dump.value("dumped_us", int64_t{0});
        trace.reason = dump.value("reason", "");
        for (const nlohmann::json& e : g.at("entries")) {
          const std::string op = e.at("op").get<std::string>();
          Entry entry;
          entry.seq = e.at("seq").get<uint64_t>();
          entry.op = op;
          entry.call = e.value("call", op);
          entry.state = e.value("state", "");
          entry.error = e.value("error", "");
          entry.issued_us = e.value("issued_us", int64_t{0});
          entry.started_us = e.value("started_us", int64_t{0});
          entry.ended_us = e.value("ended_us", int64_t{0});
          (op == "send" || op == "recv" ? trace.point_to_point : trace.collectives)
              .push_back(std::move(entry));
        }
        std::sort(trace.collectives.begin(), trace.collectives.end(),
                  [](const Entry& a, const Entry& b) { return a.seq < b.seq; });
        // Operations of a group complete in issue order, so one that
        // completed vouches for those before it whose work the program never
        // waited for (their entries still say "started").
        bool later_completed = false;
        for (auto e = trace.collectives.rbegin(); e != trace.collectives.rend(); ++e) {
          if (e->state == "completed") {
            later_completed = true;
          } else if (later_completed && !e->ended()) {
            e->state = "completed";
            e->ended_us = e->started_us != 0 ? e->started_us : e->issued_us;
          }
        }
        // A later dump of the same rank (several processes cannot share a
        // rank) replaces an earlier one.
        auto existing = group.ranks.find(trace.rank);
        if (existing == group.ranks.end() || existing->second.dumped_us < trace.dumped_us) {
          group.ranks[trace.rank] = std::move(trace);
        }
      }
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.path().string(), ": not a dist-trace dump: ", e.what()));
    }
  }
  if (groups.empty()) {
    return absl::NotFoundError(absl::StrCat("no flight recorder dumps (rank-N.json) in ", dir,
                                            "; run the job with DIST_TRACE_DIR=", dir,
                                            " (dumps are written on a failure, a "
                                            "timeout, an abort, or by dist_trace_dump)"));
  }
  std::vector<GroupTrace> out;
  for (auto& [name, group] : groups) out.push_back(std::move(group));
  return out;
}

Verdict Analyze(const GroupTrace& group) {
  Verdict verdict;
  verdict.group = group.name;
  const std::string where = absl::StrCat("group '", group.name, "': ");
  std::vector<int32_t> present, missing;
  for (int32_t r = 0; r < group.world_size; ++r) {
    (group.ranks.count(r) ? present : missing).push_back(r);
  }
  verdict.detail["ranks_with_dump"] = present;
  verdict.detail["ranks_without_dump"] = missing;
  // The window every dump still holds: earlier entries may be overwritten.
  uint64_t lo = 1, hi = 0;
  for (const auto& [rank, trace] : group.ranks) {
    if (trace.collectives.empty()) continue;
    lo = std::max(lo, trace.collectives.front().seq);
    hi = std::max(hi, trace.collectives.back().seq);
  }
  for (uint64_t seq = lo; seq <= hi; ++seq) {
    std::vector<int32_t> entered, never;
    std::vector<std::pair<std::string, std::vector<int32_t>>> calls;
    bool all_completed = true;
    for (const auto& [rank, trace] : group.ranks) {
      const Entry* e = Find(trace, seq);
      if (e == nullptr) {
        never.push_back(rank);
        continue;
      }
      entered.push_back(rank);
      if (e->state != "completed") all_completed = false;
      auto it = std::find_if(calls.begin(), calls.end(),
                             [&](const auto& c) { return c.first == e->call; });
      if (it == calls.end()) {
        calls.push_back({e->call, {rank}});
      } else {
        it->second.push_back(rank);
      }
    }
    if (entered.empty()) continue;
    std::stable_sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) {
      return a.second.size() > b.second.size();
    });
    const Entry& first = *Find(group.ranks.at(entered.front()), seq);
    verdict.seq = seq;
    verdict.op = first.op;
    verdict.detail["entered"] = entered;
    nlohmann::json by_rank;
    for (int32_t r : entered) by_rank[std::to_string(r)] = Find(group.ranks.at(r), seq)->call;
    verdict.detail["calls"] = by_rank;
    if (calls.size() > 1) {
      std::string majority_op = calls[0].first.substr(0, calls[0].first.find('('));
      std::vector<std::string> odd;
      for (size_t i = 1; i < calls.size(); ++i) {
        odd.push_back(absl::StrCat(RankList(calls[i].second), " called ", calls[i].first));
      }
      verdict.kind = "mismatch";
      verdict.op = majority_op;
      verdict.message =
          absl::StrCat(where, majority_op, " #", seq, ": ", absl::StrJoin(odd, ", "), " where ",
                       RankList(calls[0].second), " called ", calls[0].first);
      return verdict;
    }
    if (all_completed) continue;
    // The first operation that did not complete everywhere.
    if (!never.empty() || !missing.empty()) {
      std::vector<std::string> absent;
      for (int32_t r : never) {
        absent.push_back(absl::StrCat("rank ", r, " never entered it (",
                                      LastBefore(group.ranks.at(r), seq), ")"));
      }
      for (int32_t r : missing) {
        absent.push_back(absl::StrCat("rank ", r,
                                      " left no dump (stopped, killed, or without "
                                      "DIST_TRACE_DIR)"));
      }
      verdict.kind = "divergence";
      verdict.detail["never_entered"] = never;
      verdict.message = absl::StrCat(where, first.op, " #", seq, " entered by ", RankList(entered),
                                     "; ", absl::StrJoin(absent, "; "));
      return verdict;
    }
    // Everyone entered. Someone still inside while the others are out?
    std::vector<int32_t> inside, out_ok, out_failed;
    for (int32_t r : entered) {
      const Entry& e = *Find(group.ranks.at(r), seq);
      (!e.ended() ? inside : e.state == "completed" ? out_ok : out_failed).push_back(r);
    }
    if (!inside.empty() && inside.size() < entered.size()) {
      std::vector<std::string> parts;
      for (int32_t r : inside) {
        const RankTrace& t = group.ranks.at(r);
        const Entry& e = *Find(t, seq);
        parts.push_back(
            absl::StrCat("rank ", r, " is stuck inside ", e.op, " #", seq, " (", e.state, " ",
                         Seconds(t.dumped_us - (e.started_us != 0 ? e.started_us : e.issued_us)),
                         " before its dump, never completed)"));
      }
      std::string others;
      if (!out_ok.empty()) absl::StrAppend(&others, RankList(out_ok), " completed it");
      if (!out_failed.empty()) {
        absl::StrAppend(&others, others.empty() ? "" : ", ", RankList(out_failed),
                        " gave up on it");
      }
      verdict.kind = "stuck";
      verdict.detail["stuck"] = inside;
      verdict.message = absl::StrCat(where, absl::StrJoin(parts, "; "), " while ", others);
      return verdict;
    }
    // Someone arrived only after the others had given up?
    int64_t first_give_up = 0;
    for (int32_t r : out_failed) {
      const int64_t end = Find(group.ranks.at(r), seq)->ended_us;
      if (first_give_up == 0 || end < first_give_up) first_give_up = end;
    }
    std::vector<int32_t> late, waited;
    for (int32_t r : entered) {
      const Entry& e = *Find(group.ranks.at(r), seq);
      (first_give_up != 0 && e.issued_us > first_give_up ? late : waited).push_back(r);
    }
    if (!late.empty() && !waited.empty()) {
      std::vector<std::string> parts;
      for (int32_t r : late) {
        const Entry& e = *Find(group.ranks.at(r), seq);
        parts.push_back(absl::StrCat(
            "rank ", r, " entered it ", Seconds(e.issued_us - first_give_up),
            " after the others had given up (", LastBefore(group.ranks.at(r), seq), ")"));
      }
      verdict.kind = "late";
      verdict.detail["late"] = late;
      verdict.message =
          absl::StrCat(where, first.op, " #", seq, ": ", absl::StrJoin(parts, "; "), "; ",
                       RankList(waited), " waited for ", late.size() == 1 ? "it" : "them",
                       ": it was stopped or stuck before this operation");
      return verdict;
    }
    const int32_t witness = out_failed.empty() ? entered.front() : out_failed.front();
    const Entry& e = *Find(group.ranks.at(witness), seq);
    verdict.kind = inside.empty() ? "failed" : "stuck";
    verdict.message = inside.empty()
                          ? absl::StrCat(where, first.op, " #", seq, " failed on ",
                                         RankList(entered), "; rank ", witness, ": ", e.error)
                          : absl::StrCat(where, "every rank (", RankList(entered), ") is inside ",
                                         first.op, " #", seq,
                                         " and none completed it: the backend or the network "
                                         "is stalled");
    return verdict;
  }
  // The collectives agree; the first send or recv that failed, if any.
  const Entry* p2p = nullptr;
  int32_t p2p_rank = -1;
  for (const auto& [rank, trace] : group.ranks) {
    for (const Entry& e : trace.point_to_point) {
      if (e.state != "failed" && e.state != "timed_out") continue;
      if (p2p == nullptr || e.issued_us < p2p->issued_us) {
        p2p = &e;
        p2p_rank = rank;
      }
    }
  }
  if (p2p != nullptr) {
    verdict.kind = "p2p_failed";
    verdict.seq = p2p->seq;
    verdict.op = p2p->op;
    verdict.detail["rank"] = p2p_rank;
    verdict.message = absl::StrCat(where, "the collectives agree; rank ", p2p_rank, "'s ",
                                   p2p->call, " ", p2p->state, ": ", p2p->error);
    return verdict;
  }
  verdict.kind = "consistent";
  verdict.seq = hi;
  verdict.detail.erase("entered");
  verdict.detail.erase("calls");
  std::string last;
  if (hi > 0) {
    for (const auto& [rank, trace] : group.ranks) {
      if (const Entry* e = Find(trace, hi)) {
        verdict.op = e->op;
        last = absl::StrCat(" (last: ", e->op, " #", hi, ", ", e->state, ")");
        break;
      }
    }
  }
  verdict.message =
      absl::StrCat(where, RankList(present), " agree on every operation recorded", last,
                   missing.empty() ? "" : "; ", missing.empty() ? "" : RankList(missing),
                   missing.empty() ? "" : " left no dump");
  return verdict;
}

}  // namespace dist::trace

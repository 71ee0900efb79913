#include "sdk/conformance/failure.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"
#include "dist/cpp/validate.hpp"
#include "dist/dist.h"
#include "sdk/conformance/comm.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

extern char** environ;

namespace dist::conformance {
namespace {

constexpr int kBeforeFailure = 3;  // operations that succeed before the victim dies
// The survivors' first error must come within this of the failure: the
// failure detector's default bound (500 ms) and room for a loaded machine.
constexpr absl::Duration kErrorBound = absl::Seconds(3);
constexpr uint64_t kCount = 33;  // elements per rank block of the checks
constexpr char kOnPurpose[] = "this process dies on purpose";

enum class Death { kKill, kStop };

struct Round {
  dist_collective_t coll;  // DIST_COLL_SEND: a ring of sendrecv
  Death death;
  std::string Name() const {
    return absl::StrCat(coll == DIST_COLL_SEND ? "sendrecv" : dist_collective_name(coll), ", ",
                        death == Death::kKill ? "SIGKILL" : "SIGSTOP");
  }
};

// Owns the group it was made with (dist_destroy at the end).
struct Member {
  std::unique_ptr<Comm> comm;
  dist_process_group_t* group() const { return comm->core_group(); }
};

class FailureRun {
 public:
  FailureRun(const FailureOptions& options, const LoadedPlugin& plugin, Report& report)
      : options_(options), plugin_(plugin), report_(report) {
    dtype_ = (plugin.caps.dtypes & (1u << DIST_FLOAT32)) != 0 ? DIST_FLOAT32 : DIST_INT32;
    for (int c = 0; c < DIST_COLLECTIVE_COUNT; ++c) {
      const auto coll = static_cast<dist_collective_t>(c);
      if (coll == DIST_COLL_RECV || !Declared(coll)) continue;
      if (coll == DIST_COLL_SEND && !Declared(DIST_COLL_RECV)) continue;
      for (Death death : {Death::kKill, Death::kStop}) rounds_.push_back({coll, death});
    }
  }

  void Run() {
    absl::StatusOr<Member> member = Init();
    if (!member.ok()) {
      Fail(options_.join_round >= 0 ? "join (DIST_JOIN=1)" : "dist_init", member.status());
      return;
    }
    size_t first = 0;
    if (options_.join_round >= 0) {
      // Admitted into round join_round's grown group: its checks, then on.
      first = static_cast<size_t>(options_.join_round) + 1;
      if (absl::Status checked = CheckGroup(*member->comm, options_.join_round, "grown");
          !checked.ok()) {
        Fail(absl::StrCat("round ", options_.join_round, " as the joiner"), checked);
        return;
      }
    }
    for (size_t k = first; k < rounds_.size(); ++k) {
      absl::StatusOr<Member> next = RunRound(static_cast<int>(k), *member);
      if (!next.ok()) {
        Fail(absl::StrCat("round ", k, " (", rounds_[k].Name(), ")"), next.status());
        return;
      }
      member = std::move(next);
    }
    // Rank 0 hosts the store (it never dies): the joiners still use it.
    if (options_.rank == 0) ReapJoiners();
    member->comm.reset();
  }

 private:
  bool Declared(dist_collective_t coll) const {
    return (plugin_.caps.collectives & (1u << coll)) != 0;
  }

  void Fail(const std::string& what, const absl::Status& status) {
    report_.Add(
        Row{absl::StrCat("failure: ", what), "-", "-", "-", Outcome::kFail, status.ToString()});
  }

  absl::StatusOr<Member> Init() {
    const bool joining = options_.join_round >= 0;
    dist_init_options_t init = dist_init_options_default();
    init.backend = options_.plugin.c_str();
    init.init_method = options_.url.c_str();
    if (!joining) {
      init.rank = options_.rank;
      init.world_size = options_.world_size;
    }
    init.timeout_ms = options_.op_timeout_ms;
    init.group_name = "conformance";
    const dist_kv_t settings[] = {{"dist.survival", "1"}, {"dist.join", "1"}};
    init.options = settings;
    init.num_options = joining ? 2 : 1;
    dist_process_group_t* group = nullptr;
    DIST_RETURN_IF_ERROR(TakeError(dist_init(&init, &group)));
    return Member{AdoptCoreGroup(group)};
  }

  // One round on a member of `current`: the victim dies, the others check
  // their error, shrink, check, grow (rank 0 starting the joiner), check.
  absl::StatusOr<Member> RunRound(int k, Member& current) {
    const Round& round = rounds_[k];
    Comm& comm = *current.comm;
    const int32_t world = comm.world_size();
    const int32_t me = comm.rank();
    if (world < 2) return absl::FailedPreconditionError("needs at least 2 ranks");
    const int32_t victim = 1 + k % (world - 1);  // never rank 0: it starts the joiners
    absl::StatusOr<std::vector<int64_t>> pids = GatherPids(comm);
    if (!pids.ok()) return Prefix(pids.status(), "exchanging pids before the failure");

    // Operations until the failure shows; the victim dies during one.
    absl::Time failure_start = absl::InfiniteFuture();
    absl::Status error;
    for (int i = 0; error.ok() && i < 100000; ++i) {
      if (i == kBeforeFailure) failure_start = absl::Now();
      error = OneOperation(comm, round, /*dies=*/me == victim && i == kBeforeFailure, i);
      if (i >= kBeforeFailure && absl::Now() - failure_start > 2 * kErrorBound) break;
    }
    if (error.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", victim, " died, but the operations kept succeeding for ",
          absl::FormatDuration(2 * kErrorBound), " (want DIST_REVOKED or the peer's failure)"));
    }
    const absl::Duration took = absl::Now() - failure_start;
    if (failure_start == absl::InfiniteFuture()) {
      return Prefix(error, "an operation failed before the failure");
    }
    const std::string message(error.message());
    const bool revoked = error.code() == static_cast<absl::StatusCode>(DIST_REVOKED);
    const bool peer_failure =
        (absl::IsUnavailable(error) || absl::IsAborted(error)) && NamesRank(message, victim);
    if (!revoked && !peer_failure) {
      return absl::InternalError(
          absl::StrCat("after rank ", victim,
                       " died: want DIST_REVOKED or an error naming it, got ", error.ToString()));
    }
    if (took > kErrorBound) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the error came ", absl::FormatDuration(took), " after rank ", victim,
          " died, over the bound of ", absl::FormatDuration(kErrorBound), ": ", error.ToString()));
    }

    // Shrink; a stopped victim is ended once the others went on.
    dist_shrink_options_t shrink_options{sizeof(dist_shrink_options_t), options_.op_timeout_ms};
    dist_process_group_t* shrunk_group = nullptr;
    DIST_RETURN_IF_ERROR(Prefix(
        TakeError(dist_shrink(current.group(), &shrink_options, &shrunk_group)), "dist_shrink"));
    Member shrunk{AdoptCoreGroup(shrunk_group)};
    if (round.death == Death::kStop && me == 0) kill(static_cast<pid_t>((*pids)[victim]), SIGKILL);
    const int32_t want_rank = me < victim ? me : me - 1;
    if (shrunk.comm->world_size() != world - 1 || shrunk.comm->rank() != want_rank) {
      return absl::InternalError(absl::StrCat("shrunk group: rank ", shrunk.comm->rank(), " of ",
                                              shrunk.comm->world_size(), ", want ", want_rank,
                                              " of ", world - 1));
    }
    DIST_RETURN_IF_ERROR(CheckGroup(*shrunk.comm, k, "shrunk"));

    // Grow back: rank 0 starts the process that joins.
    if (me == 0) DIST_RETURN_IF_ERROR(StartJoiner(k));
    dist_grow_options_t grow_options{sizeof(dist_grow_options_t), options_.op_timeout_ms, 1};
    dist_process_group_t* grown_group = nullptr;
    DIST_RETURN_IF_ERROR(
        Prefix(TakeError(dist_grow(shrunk.group(), &grow_options, &grown_group)), "dist_grow"));
    Member grown{AdoptCoreGroup(grown_group)};
    if (grown.comm->world_size() != world || grown.comm->rank() != want_rank) {
      return absl::InternalError(absl::StrCat("grown group: rank ", grown.comm->rank(), " of ",
                                              grown.comm->world_size(), ", want ", want_rank,
                                              " of ", world));
    }
    DIST_RETURN_IF_ERROR(CheckGroup(*grown.comm, k, "grown"));
    if (me == 0) {
      report_.Add(
          Row{absl::StrCat("failure: ", round.Name(), " of rank ", victim, " of ", world), "-", "-",
              "-", Outcome::kPass,
              absl::StrCat("first error after ", absl::FormatDuration(took), " (",
                           dist_error_code_name(static_cast<dist_error_code_t>(error.code())),
                           "); shrunk to ", world - 1, " and grown to ", world,
                           ", every collective checked on both")});
    }
    return grown;
  }

  // One operation of the round, started and waited for; the victim starts
  // it and dies with it in flight.
  absl::Status OneOperation(Comm& comm, const Round& round, bool dies, int i) {
    const int32_t world = comm.world_size();
    const int32_t me = comm.rank();
    const size_t es = dist_dtype_size(dtype_);
    std::vector<std::unique_ptr<Work>> works;
    std::vector<std::vector<unsigned char>> memory;
    auto buffer = [&](uint64_t count) {
      memory.emplace_back(std::max<uint64_t>(count, 1) * es, 0);
      return dist_make_buffer(memory.back().data(), count, dtype_, dist_cpu());
    };
    memory.reserve(4);
    if (round.coll == DIST_COLL_SEND) {
      dist_op_args_t send = MakeArgs(
          buffer(kCount), dist_make_buffer(nullptr, 0, dtype_, dist_cpu()), options_.op_timeout_ms);
      send.peer = (me + 1) % world;
      send.tag = i;
      dist_op_args_t recv = MakeArgs(dist_make_buffer(nullptr, 0, dtype_, dist_cpu()),
                                     buffer(kCount), options_.op_timeout_ms);
      recv.peer = (me + world - 1) % world;
      recv.tag = i;
      for (const auto& [coll, args] : {std::pair{DIST_COLL_SEND, send}, {DIST_COLL_RECV, recv}}) {
        absl::StatusOr<std::unique_ptr<Work>> work = comm.Start(coll, args);
        if (!work.ok()) return work.status();
        works.push_back(*std::move(work));
      }
    } else {
      uint64_t send_count = 0, recv_count = 0;
      Shapes(round.coll, kCount, world, &send_count, &recv_count);
      dist_op_args_t args =
          MakeArgs(buffer(send_count), buffer(recv_count), options_.op_timeout_ms);
      absl::StatusOr<std::unique_ptr<Work>> work = comm.Start(round.coll, args);
      if (!work.ok()) return work.status();
      works.push_back(*std::move(work));
    }
    if (dies) Die(round);
    absl::Status status;
    for (auto& work : works) {
      absl::Status waited = work->Wait(options_.op_timeout_ms + kWaitSlackMs);
      if (status.ok()) status = waited;
    }
    return status;
  }

  [[noreturn]] void Die(const Round& round) {
    report_.Add(
        Row{absl::StrCat("failure: ", round.Name()), "-", "-", "-", Outcome::kPass, kOnPurpose});
    std::fflush(nullptr);
    raise(round.death == Death::kKill ? SIGKILL : SIGSTOP);
    // Resumed (rank 0 sends SIGKILL, not SIGCONT): should not happen.
    _exit(3);
  }

  // Every rank's pid, through an all_gather of 64-bit integers.
  absl::StatusOr<std::vector<int64_t>> GatherPids(Comm& comm) {
    const int64_t mine = getpid();
    std::vector<int64_t> all(comm.world_size());
    dist_op_args_t args = MakeArgs(
        dist_make_buffer(const_cast<int64_t*>(&mine), 1, DIST_INT64, dist_cpu()),
        dist_make_buffer(all.data(), all.size(), DIST_INT64, dist_cpu()), options_.op_timeout_ms);
    DIST_RETURN_IF_ERROR(
        TakeError(dist_all_gather(comm.core_group(), &args.send, &args.recv, nullptr)));
    return all;
  }

  // Every declared collective on `comm` against the reference, rooted ones
  // at the last rank (a joiner in a grown group), and a sendrecv ring.
  absl::Status CheckGroup(Comm& comm, int k, const char* which) {
    const int32_t world = comm.world_size();
    uint64_t seed = static_cast<uint64_t>(k) * 1000 + (which[0] == 'g' ? 500 : 0);
    for (int c = 0; c < DIST_COLLECTIVE_COUNT; ++c) {
      const auto coll = static_cast<dist_collective_t>(c);
      if (coll == DIST_COLL_SEND || coll == DIST_COLL_RECV || !Declared(coll)) continue;
      if (coll == DIST_COLL_BARRIER) {
        DIST_RETURN_IF_ERROR(Prefix(TakeError(dist_barrier(comm.core_group(), nullptr)),
                                    absl::StrCat(which, " group of ", world, ": barrier")));
        continue;
      }
      Case one{coll, dtype_, std::nullopt, kCount, world - 1, false, ++seed};
      if (dist::IsReducing(coll)) one.op = DIST_SUM;
      DIST_RETURN_IF_ERROR(
          Prefix(RunCase(comm, dist_cpu(), one, options_.op_timeout_ms),
                 absl::StrCat(which, " group of ", world, ": ", dist_collective_name(coll))));
    }
    if (world < 2 || !Declared(DIST_COLL_SEND) || !Declared(DIST_COLL_RECV)) {
      return absl::OkStatus();
    }
    const int32_t me = comm.rank();
    std::vector<int32_t> out(kCount, me * 7 + 1), in(kCount, -1);
    const int32_t from = (me + world - 1) % world;
    const dist_buffer_t send = dist_make_buffer(out.data(), kCount, DIST_INT32, dist_cpu());
    const dist_buffer_t recv = dist_make_buffer(in.data(), kCount, DIST_INT32, dist_cpu());
    DIST_RETURN_IF_ERROR(
        Prefix(TakeError(dist_sendrecv(comm.core_group(), &send, (me + 1) % world, &recv, from, 7)),
               absl::StrCat(which, " group: sendrecv")));
    for (int32_t v : in) {
      if (v != from * 7 + 1) {
        return absl::InternalError(absl::StrCat(which, " group: sendrecv from rank ", from,
                                                " gave ", v, ", want ", from * 7 + 1));
      }
    }
    return absl::OkStatus();
  }

  // The process that joins in round k: this binary again, DIST_JOIN=1.
  absl::Status StartJoiner(int k) {
    const std::string dir =
        options_.results_file.substr(0, options_.results_file.find_last_of('/'));
    std::vector<std::string> args = {options_.self};
    args.insert(args.end(), options_.worker_args.begin(), options_.worker_args.end());
    args.push_back("--worker");
    args.push_back("--url=" + options_.url);
    args.push_back(absl::StrCat("--join_round=", k));
    args.push_back(absl::StrCat("--results_file=", dir, "/joiner", k, ".tsv"));
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, options_.self.c_str(), nullptr, nullptr, argv.data(), environ);
    if (rc != 0) {
      return absl::InternalError(
          absl::StrCat("starting the joiner ", options_.self, ": ", std::strerror(rc)));
    }
    joiners_.push_back({pid, absl::StrCat(dir, "/joiner", k, ".tsv")});
    return absl::OkStatus();
  }

  // Rank 0 waits for the joiners it started: each ends cleanly or died on
  // purpose in a later round.
  void ReapJoiners() {
    const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.op_timeout_ms);
    for (const auto& [pid, file] : joiners_) {
      int status = 0;
      pid_t ended = 0;
      while ((ended = waitpid(pid, &status, WNOHANG)) == 0 && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      if (ended == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
      absl::StatusOr<std::vector<Row>> rows = ReadRows(file);
      const bool on_purpose = rows.ok() && DiedOnPurpose(*rows);
      const bool clean = ended != 0 && ((WIFEXITED(status) && WEXITSTATUS(status) <= 1) ||
                                        (WIFSIGNALED(status) && on_purpose));
      report_.Add(Row{absl::StrCat("failure: joiner ", file.substr(file.find_last_of('/') + 1),
                                   " ended cleanly"),
                      "-", "-", "-", clean ? Outcome::kPass : Outcome::kFail,
                      clean        ? ""
                      : ended == 0 ? "still running (killed)"
                                   : absl::StrCat("wait status ", status)});
      // Its failures are its own rows: bring them into this report.
      if (rows.ok()) {
        for (const Row& row : *rows) {
          if (row.outcome == Outcome::kFail) report_.Add(row);
        }
      }
    }
  }

  const FailureOptions& options_;
  const LoadedPlugin& plugin_;
  Report& report_;
  dist_dtype_t dtype_;
  std::vector<Round> rounds_;
  std::vector<std::pair<pid_t, std::string>> joiners_;
};

}  // namespace

bool DiedOnPurpose(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    if (row.detail == kOnPurpose) return true;
  }
  return false;
}

int RunFailureWorker(const FailureOptions& options) {
  Report report(options.results_file);
  report.Note("failure");
  absl::StatusOr<LoadedPlugin> plugin = LoadPlugin(options.plugin);
  if (!plugin.ok()) {
    report.Add(Row{"load the plugin (dist_load_backend)", "-", "-", "-",
                   absl::IsUnavailable(plugin.status()) ? Outcome::kSkip : Outcome::kFail,
                   plugin.status().ToString()});
    return report.failed() > 0 ? 1 : 0;
  }
  if ((plugin->caps.flags & DIST_CAP_SHRINK) == 0) {
    report.Add(Row{"failure: the backend can shrink", "-", "-", "-", Outcome::kSkip,
                   "its capabilities do not include DIST_CAP_SHRINK"});
    return 0;
  }
  if ((plugin->caps.device_types & (1u << DIST_DEVICE_CPU)) == 0) {
    report.Add(Row{"failure: host buffers", "-", "-", "-", Outcome::kSkip,
                   "the section runs on host buffers; the backend takes none"});
    return 0;
  }
  FailureRun(options, *plugin, report).Run();
  return report.failed() > 0 ? 1 : 0;
}

}  // namespace dist::conformance

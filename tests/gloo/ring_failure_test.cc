// A peer lost in the middle of the pipelined ring (ring_pipelined.h): the
// gloo plugin's own class for all_reduce over 1 MiB and all_gather and
// broadcast from 1 MiB. Three forked ranks go through the real core
// (dist_init, file:// rendezvous, the bundled plugin) and loop on large
// collectives, checking every result that completes against values computed
// here; then rank 2 signals itself from a second thread while the loop runs.
//   SIGKILL: both survivors get UNAVAILABLE naming rank 2 within a few
//            seconds of the kill, well under the operation's timeout.
//   SIGSTOP: rank 2 still holds its connections, so nothing tells the others
//            it is gone: both survivors get UNAVAILABLE naming rank 2 once
//            the timeout has run out, not much later; then the test kills
//            the stopped rank.
// The parent bounds everything: ranks still running at the limit are killed.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dist/dist.h"
#include "dist/registry.h"
#include "gtest/gtest.h"
#include "tests/common/rank_harness.h"

namespace dist_test {

// RunRanks loads the plugin before it forks. Here through the core's
// registry, which dist_init then finds already loaded.
const dist_backend_plugin_t* Plugin() {
  static const dist_backend_plugin_t* plugin = [] {
    const dist_backend_plugin_t* table = nullptr;
    if (dist_error_t* e = dist_load_backend("gloo", &table)) {
      std::fprintf(stderr, "cannot load the gloo backend: %s\n", dist_error_message(e));
      std::abort();
    }
    return table;
  }();
  return plugin;
}

namespace {

constexpr int kWorld = 3;
constexpr int kVictim = 2;
// Rounds every rank completes before the victim's signal is armed.
constexpr int kRoundsBefore = 3;
constexpr int kMaxRounds = 100000;

enum class Collective { kAllReduce, kAllGather, kBroadcast };

struct Case {
  const char* name;
  Collective collective;
  int signal;
  int64_t timeout_ms;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Written by the victim just before it signals itself, read by the
// survivors: memory shared by every forked rank.
struct Shared {
  std::atomic<int64_t> signal_ns{0};  // wall clock, comparable across processes
  std::atomic<int> in_op{0};          // the victim was inside a collective
};

// One round of the collective on this rank: fills the inputs, runs it,
// checks the result of a round that completes. 16 MiB of float32 for
// all_reduce (sums of small integers, exact); 2 MiB per rank for all_gather
// and 2 MiB from root 0 for broadcast (int32). Returns the operation's error.
class Round {
 public:
  Round(Collective collective, int rank) : collective_(collective), rank_(rank) {
    switch (collective) {
      case Collective::kAllReduce:
        in_.resize(size_t{4} << 20);
        out_.resize(in_.size());
        break;
      case Collective::kAllGather:
        ints_in_.resize(size_t{512} << 10);
        ints_out_.resize(ints_in_.size() * kWorld);
        break;
      case Collective::kBroadcast:
        ints_out_.resize(size_t{512} << 10);
        break;
    }
  }

  dist_error_t* Run(dist_process_group_t* group, int round) {
    switch (collective_) {
      case Collective::kAllReduce: {
        for (size_t k = 0; k < in_.size(); ++k) in_[k] = static_cast<float>(Input(rank_, k, round));
        const dist_buffer_t s = dist_make_buffer(in_.data(), in_.size(), DIST_FLOAT32, dist_cpu());
        const dist_buffer_t r =
            dist_make_buffer(out_.data(), out_.size(), DIST_FLOAT32, dist_cpu());
        return dist_all_reduce(group, &s, &r, DIST_SUM, nullptr);
      }
      case Collective::kAllGather: {
        for (size_t k = 0; k < ints_in_.size(); ++k) ints_in_[k] = Block(rank_, k, round);
        std::fill(ints_out_.begin(), ints_out_.end(), -1);
        const dist_buffer_t s =
            dist_make_buffer(ints_in_.data(), ints_in_.size(), DIST_INT32, dist_cpu());
        const dist_buffer_t r =
            dist_make_buffer(ints_out_.data(), ints_out_.size(), DIST_INT32, dist_cpu());
        return dist_all_gather(group, &s, &r, nullptr);
      }
      case Collective::kBroadcast: {
        for (size_t k = 0; k < ints_out_.size(); ++k) {
          ints_out_[k] = rank_ == 0 ? Block(0, k, round) : -1;
        }
        const dist_buffer_t b =
            dist_make_buffer(ints_out_.data(), ints_out_.size(), DIST_INT32, dist_cpu());
        return dist_broadcast(group, &b, &b, 0, nullptr);
      }
    }
    return nullptr;
  }

  // The first wrong element, as text; empty when all are right.
  std::string Check(int round) const {
    switch (collective_) {
      case Collective::kAllReduce:
        for (size_t k = 0; k < out_.size(); ++k) {
          int64_t want = 0;
          for (int r = 0; r < kWorld; ++r) want += Input(r, k, round);
          if (out_[k] != static_cast<float>(want)) {
            return absl::StrCat("element ", k, " is ", out_[k], ", want ", want);
          }
        }
        return "";
      case Collective::kAllGather:
        for (size_t k = 0; k < ints_out_.size(); ++k) {
          const size_t block = ints_in_.size();
          const int32_t want = Block(static_cast<int>(k / block), k % block, round);
          if (ints_out_[k] != want) {
            return absl::StrCat("element ", k, " is ", ints_out_[k], ", want ", want);
          }
        }
        return "";
      case Collective::kBroadcast:
        for (size_t k = 0; k < ints_out_.size(); ++k) {
          if (ints_out_[k] != Block(0, k, round)) {
            return absl::StrCat("element ", k, " is ", ints_out_[k], ", want ", Block(0, k, round));
          }
        }
        return "";
    }
    return "";
  }

 private:
  // Small integers: every sum of three is exact in float32.
  static int64_t Input(int rank, size_t k, int round) {
    return static_cast<int64_t>((7 * k + 13 * static_cast<size_t>(rank) + 5 * round) % 64);
  }
  static int32_t Block(int rank, size_t k, int round) {
    return static_cast<int32_t>(rank * 10000000 + static_cast<int>(k % 1000000) + round);
  }

  const Collective collective_;
  const int rank_;
  std::vector<float> in_, out_;
  std::vector<int32_t> ints_in_, ints_out_;
};

int RunRank(int rank, const Case& c, const std::string& store, Shared* shared) {
  dist_init_options_t options = dist_init_options_default();
  options.backend = "gloo";
  const std::string url = absl::StrCat("file://", store, "?rank=", rank, "&world_size=", kWorld);
  options.init_method = url.c_str();
  options.timeout_ms = c.timeout_ms;
  dist_process_group_t* group = nullptr;
  RANK_OK(rank, dist_init(&options, &group));
  Round one(c.collective, rank);
  for (int round = 0; round < kMaxRounds; ++round) {
    if (rank == kVictim && round == kRoundsBefore) {
      // Signals this whole process a few milliseconds on, most likely in
      // the middle of a collective (a 16 MiB one takes tens of them).
      std::thread([shared, signal = c.signal] {
        absl::SleepFor(absl::Milliseconds(getpid() % 20));
        shared->signal_ns.store(absl::GetCurrentTimeNanos());
        std::fprintf(stderr, "rank 2: %s to itself %s\n", signal == SIGKILL ? "SIGKILL" : "SIGSTOP",
                     shared->in_op.load() ? "inside a collective" : "between collectives");
        std::fflush(stderr);
        raise(signal);
      }).detach();
    }
    if (rank == kVictim) shared->in_op.store(1);
    const absl::Time start = absl::Now();
    dist_error_t* e = one.Run(group, round);
    const absl::Time end = absl::Now();
    if (rank == kVictim) shared->in_op.store(0);
    if (e == nullptr) {
      const std::string wrong = one.Check(round);
      if (!wrong.empty()) {
        std::fprintf(stderr, "rank %d, round %d: %s\n", rank, round, wrong.c_str());
        return 1;
      }
      continue;
    }
    // A survivor's failure: after the signal, soon enough, naming rank 2.
    const int64_t signal_ns = shared->signal_ns.load();
    const absl::Duration after_signal = end - absl::FromUnixNanos(signal_ns);
    const std::string message = dist_error_message(e);
    std::fprintf(stderr, "rank %d, round %d, %s after the signal (the call took %s): %s: %s\n",
                 rank, round, absl::FormatDuration(after_signal).c_str(),
                 absl::FormatDuration(end - start).c_str(),
                 dist_error_code_name(dist_error_code(e)), message.c_str());
    RANK_CHECK(rank, rank != kVictim);
    RANK_CHECK(rank, signal_ns != 0);  // nothing failed before the signal
    RANK_CHECK(rank, round >= kRoundsBefore);
    RANK_CHECK(rank, dist_error_code(e) == DIST_UNAVAILABLE);
    const absl::Duration timeout = absl::Milliseconds(c.timeout_ms);
    if (c.signal == SIGKILL) {
      // The closed sockets tell at once; the plugin then waits up to 0.8 s
      // for rank 2's report of its own (it never comes): well under the
      // timeout.
      RANK_CHECK(rank, after_signal < timeout / 2);
      // Said by the survivor itself, or as the group's first failure (a
      // survivor that only loses rank 2's neighbour on the broadcast's
      // chain).
      RANK_CHECK(rank, absl::StrContains(message, "lost the connection to rank 2"));
    } else {
      // Only the timeout tells. It counts from the start of the call, which
      // may be before the signal; then up to a tenth of it to compare
      // notes, plus scheduling slack.
      RANK_CHECK(rank, end - start >= timeout / 2);  // it did wait
      RANK_CHECK(rank, end - start <= timeout + absl::Seconds(1));
      RANK_CHECK(rank, after_signal <= timeout + absl::Seconds(1));
      if (c.collective == Collective::kBroadcast) {
        // The root's sends complete into socket buffers, so it may be
        // rounds ahead of the chain when rank 2 stops (seen under TSan: 9
        // rounds): rank 1 may then count it among the silent ranks too, and
        // the root learns of the failure from rank 1.
        RANK_CHECK(rank, absl::StrContains(message, "2 (dead, stuck") ||
                             absl::StrContains(message, "ranks not responding: 2") ||
                             (rank == 0 && absl::StrContains(message,
                                                             "first failure in the "
                                                             "group: rank 1")));
      } else {
        RANK_CHECK(rank, absl::StrContains(message, ": 2 (dead, stuck") ||
                             absl::StrContains(message, "ranks not responding: 2"));
      }
    }
    dist_error_destroy(e);
    dist_destroy(group);
    return 0;
  }
  std::fprintf(stderr, "rank %d: %d rounds and no failure\n", rank, kMaxRounds);
  return 1;
}

class RingFailureTest : public ::testing::TestWithParam<Case> {};

TEST_P(RingFailureTest, SurvivorsNameRank2InTime) {
  const Case& c = GetParam();
  const std::string store = TempDir(absl::StrCat("ring_", c.name)) + "/store";
  void* memory =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  Shared* shared = new (memory) Shared;
  // The survivors' bound: init, the rounds, the timeout and the notes, with
  // room for a loaded machine and sanitizers. The stopped rank never ends
  // by itself: once the survivors have (seen without reaping them), it is
  // killed, and RunRanks reaps all three within its own limit.
  const absl::Duration survivors_limit = absl::Milliseconds(c.timeout_ms) + absl::Seconds(25);
  const absl::Time start = absl::Now();
  auto results = RunRanks(
      kWorld, absl::Seconds(10), [&](int rank) { return RunRank(rank, c, store, shared); },
      [&](const std::vector<pid_t>& pids) {
        const absl::Time deadline = absl::Now() + survivors_limit;
        for (int rank = 0; rank < kWorld; ++rank) {
          if (rank == kVictim) continue;
          for (;;) {
            siginfo_t info{};
            if (waitid(P_PID, pids[rank], &info, WEXITED | WNOHANG | WNOWAIT) != 0) break;
            if (info.si_pid == pids[rank] || absl::Now() > deadline) break;
            absl::SleepFor(absl::Milliseconds(5));
          }
        }
        kill(pids[kVictim], SIGKILL);
      });
  std::fprintf(stderr, "%s: %s in all\n", c.name,
               absl::FormatDuration(absl::Now() - start).c_str());
  for (int rank = 0; rank < kWorld; ++rank) {
    if (rank == kVictim) {
      EXPECT_TRUE(WIFSIGNALED(results[rank].status) && WTERMSIG(results[rank].status) == SIGKILL)
          << results[rank].Describe();
    } else {
      EXPECT_TRUE(results[rank].ok()) << "rank " << rank << ": " << results[rank].Describe();
    }
  }
  munmap(memory, sizeof(Shared));
}

INSTANTIATE_TEST_SUITE_P(
    Ring, RingFailureTest,
    ::testing::Values(Case{"all_reduce_killed", Collective::kAllReduce, SIGKILL, 20000},
                      Case{"all_gather_killed", Collective::kAllGather, SIGKILL, 20000},
                      Case{"broadcast_killed", Collective::kBroadcast, SIGKILL, 20000},
                      Case{"all_reduce_stopped", Collective::kAllReduce, SIGSTOP, 3000},
                      Case{"all_gather_stopped", Collective::kAllGather, SIGSTOP, 3000},
                      // On the chain from root 0, rank 1 only writes to
                      // the stopped rank 2, and rank 0 runs broadcasts
                      // ahead on rank 1's socket buffers: the writes are
                      // bounded by the run's deadline (socket_deadline.h).
                      Case{"broadcast_stopped", Collective::kBroadcast, SIGSTOP, 3000}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dist_test

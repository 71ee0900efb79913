#include "tests/survival/scenario.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dist/dist.h"

namespace dist_survival {
namespace {

constexpr int kMaxWorld = 16;
constexpr uint64_t kCount = 1000;
constexpr int64_t kTimeoutMs = 20000;
// Every survivor is done well within this (the failure detector's bound
// plus the shrink); past it the parent kills the job and says so.
constexpr absl::Duration kJobBound = absl::Seconds(90);

// In memory every forked rank shares with the parent.
struct Shared {
  int64_t failure_ns;
  int64_t error_ns[kMaxWorld];
  int64_t first_ok_ns[kMaxWorld];
  int64_t grown_ok_ns[kMaxWorld];   // by rank in the grown group
  char errors[2 * kMaxWorld][512];  // ranks, then joiners
  // resume_victim: the resumed victim's shrink has answered; until then
  // the survivors keep the old group (and rank 0 the tcp:// store) alive.
  int victim_answered;
};

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Takes `error`; returns its "CODE: message".
std::string Describe(dist_error_t* error) {
  std::string text =
      absl::StrCat(dist_error_code_name(dist_error_code(error)), ": ", dist_error_message(error));
  dist_error_destroy(error);
  return text;
}

dist_buffer_t Cpu(std::vector<float>& v) {
  return dist_make_buffer(v.data(), v.size(), DIST_FLOAT32, dist_cpu());
}

std::string CheckGrown(dist_process_group_t* g, int world, Shared* shared);

class Rank {
 public:
  Rank(const Scenario& s, int rank) : s_(s), rank_(rank) {
    for (int r = 0; r < s.world; ++r) {
      if (!s.Lost(r)) survivors_.push_back(r);
    }
  }

  // "" when every check held, else the first that did not.
  std::string Run(Shared* shared) {
    setenv("DIST_SURVIVAL", "1", 1);
    const std::string url =
        s_.tcp_port > 0
            ? absl::StrCat("tcp://127.0.0.1:", s_.tcp_port, "?rank=", rank_,
                           "&world_size=", s_.world)
            : absl::StrCat("file://", s_.dir, "/store?rank=", rank_, "&world_size=", s_.world);
    dist_init_options_t options = dist_init_options_default();
    options.backend = s_.backend.c_str();
    options.init_method = url.c_str();
    options.timeout_ms = kTimeoutMs;
    dist_process_group_t* group = nullptr;
    if (dist_error_t* e = dist_init(&options, &group)) return "init: " + Describe(e);
    std::string failed = UntilFailure(group, shared);
    if (failed.empty() && rank_ == s_.second_victim && s_.second_dies_during_shrink) {
      absl::SleepFor(absl::Milliseconds(100));  // the others are in their shrink by now
      raise(SIGKILL);
    }
    if (failed.empty()) failed = AfterFailure(group, shared);
    if (resumed_) {
      __atomic_store_n(&shared->victim_answered, 1, __ATOMIC_RELEASE);
    } else if (s_.resume_victim) {
      const absl::Time until = absl::Now() + absl::Seconds(30);
      while (__atomic_load_n(&shared->victim_answered, __ATOMIC_ACQUIRE) == 0 &&
             absl::Now() < until) {
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
    dist_destroy(group);
    return failed;
  }

 private:
  // One all_reduce in place, blocking or through a work handle.
  dist_error_t* AllReduce(dist_process_group_t* group, const dist_buffer_t* b) const {
    if (!s_.asynchronous) return dist_all_reduce(group, b, b, DIST_SUM, nullptr);
    dist_work_t* work = nullptr;
    if (dist_error_t* e = dist_all_reduce(group, b, b, DIST_SUM, &work)) return e;
    dist_error_t* e = dist_work_wait(work, -1);
    dist_work_destroy(work);
    return e;
  }

  // All-reduces until the group fails; "" when it failed as it should.
  std::string UntilFailure(dist_process_group_t* group, Shared* shared) {
    std::vector<float> v(kCount);
    const int w = s_.world;
    for (int iter = 0; iter < 100000; ++iter) {
      const bool dies_now =
          rank_ == s_.victim || (rank_ == s_.second_victim && !s_.second_dies_during_shrink);
      if (dies_now && iter == s_.iterations_before) {
        shared->failure_ns = NowNs();
        if (s_.failure == Failure::kKill) raise(SIGKILL);
        if (s_.failure == Failure::kStop) {
          raise(SIGSTOP);
          resumed_ = true;  // the survivors have gone on without this rank
        } else if (dist_error_t* e = dist_revoke(group, "the test revokes the group")) {
          return "dist_revoke: " + Describe(e);
        }
      }
      std::fill(v.begin(), v.end(), static_cast<float>(rank_ + 1 + iter));
      dist_buffer_t b = Cpu(v);
      if (dist_error_t* e = AllReduce(group, &b)) {
        shared->error_ns[rank_] = NowNs();
        const dist_error_code_t code = dist_error_code(e);
        const std::string text = Describe(e);
        if (iter < s_.iterations_before) return "all_reduce before the failure: " + text;
        const bool peer_gone =
            (s_.failure == Failure::kKill || resumed_) && code == DIST_UNAVAILABLE;
        if (code != DIST_REVOKED && !peer_gone) {
          return "the failed group's all_reduce: want REVOKED, got " + text;
        }
        if (code == DIST_REVOKED && s_.failure == Failure::kRevoke &&
            text.find(absl::StrCat("revoked by rank ", s_.victim, ": the test revokes")) ==
                std::string::npos) {
          return "the revoke does not name its rank and reason: " + text;
        }
        return "";
      }
      const float want = static_cast<float>(w * (w + 1) / 2 + w * iter);
      if (v[0] != want || v[kCount - 1] != want) {
        return absl::StrCat("all_reduce ", iter, ": ", v[0], ", want ", want);
      }
    }
    return "the group never failed";
  }

  std::string AfterFailure(dist_process_group_t* group, Shared* shared) {
    dist_shrink_options_t options{sizeof(dist_shrink_options_t), kTimeoutMs};
    dist_process_group_t* shrunk = nullptr;
    dist_error_t* error = dist_shrink(group, &options, &shrunk);
    if (resumed_) {  // declared failed while stopped
      if (error == nullptr) {
        dist_destroy(shrunk);
        return "a rank the survivors left out shrank with them";
      }
      const dist_error_code_t code = dist_error_code(error);
      const std::string text = Describe(error);
      if (code != DIST_FAILED_PRECONDITION ||
          text.find("was declared failed by the survivors") == std::string::npos) {
        return "the left-out rank's shrink: " + text;
      }
      return "";
    }
    if (s_.tcp_port > 0 && s_.victim == 0) {  // the store died with rank 0
      if (error == nullptr) return "shrink succeeded without the store";
      const std::string text = Describe(error);
      if (text.find("survival needs a store that outlives every rank") == std::string::npos) {
        return "shrink without the store: " + text;
      }
      return "";
    }
    if (error != nullptr) return "shrink: " + Describe(error);
    std::string failed = CheckShrunk(shrunk, shared);
    if (failed.empty() && s_.grow) failed = Grow(shrunk, shared);
    dist_destroy(shrunk);
    if (!failed.empty()) return failed;
    // The old group: revoked for good, and it knows whom it lost.
    std::vector<int32_t> lost(kMaxWorld);
    size_t count = 0;
    if (dist_error_t* e = dist_failed_ranks(group, lost.data(), lost.size(), &count)) {
      return "dist_failed_ranks: " + Describe(e);
    }
    lost.resize(count);
    std::vector<int32_t> want_lost;
    for (int r = 0; r < s_.world; ++r) {
      if (s_.Lost(r)) want_lost.push_back(r);
    }
    if (lost != want_lost) {
      return absl::StrCat("dist_failed_ranks: [", absl::StrJoin(lost, ","), "], want [",
                          absl::StrJoin(want_lost, ","), "]");
    }
    std::vector<float> v(kCount, 1.f);
    dist_buffer_t b = Cpu(v);
    dist_error_t* e = dist_all_reduce(group, &b, &b, DIST_SUM, nullptr);
    if (e == nullptr) return "the old group ran an all_reduce after the shrink";
    if (dist_error_code(e) != DIST_REVOKED) return "the old group after the shrink: " + Describe(e);
    dist_error_destroy(e);
    return "";
  }

  // The new group: ranks renumbered in order, every check against values
  // computed from the survivors' old ranks.
  std::string CheckShrunk(dist_process_group_t* g, Shared* shared) {
    const int n = static_cast<int>(survivors_.size());
    const int me = static_cast<int>(std::find(survivors_.begin(), survivors_.end(), rank_) -
                                    survivors_.begin());
    if (dist_world_size(g) != n || dist_rank(g) != me) {
      return absl::StrCat("shrunk group: rank ", dist_rank(g), " of ", dist_world_size(g),
                          ", want ", me, " of ", n);
    }
    std::vector<float> v(kCount);
    for (uint64_t i = 0; i < kCount; ++i) v[i] = static_cast<float>((rank_ + 1) * (i % 7 + 1));
    dist_buffer_t b = Cpu(v);
    if (dist_error_t* e = dist_all_reduce(g, &b, &b, DIST_SUM, nullptr)) {
      return "shrunk all_reduce: " + Describe(e);
    }
    shared->first_ok_ns[rank_] = NowNs();
    int old_sum = 0;
    for (int r : survivors_) old_sum += r + 1;
    for (uint64_t i = 0; i < kCount; ++i) {
      if (v[i] != static_cast<float>(old_sum * (i % 7 + 1))) {
        return absl::StrCat("shrunk all_reduce [", i, "]: ", v[i], ", want ",
                            old_sum * (i % 7 + 1));
      }
    }
    const int root = 1 % n;
    std::vector<float> c(kCount, me == root ? 0.f : -1.f);
    if (me == root) {
      for (uint64_t i = 0; i < kCount; ++i) c[i] = static_cast<float>(i * 3);
    }
    dist_buffer_t cb = Cpu(c);
    if (dist_error_t* e = dist_broadcast(g, &cb, &cb, root, nullptr)) {
      return "shrunk broadcast: " + Describe(e);
    }
    for (uint64_t i = 0; i < kCount; ++i) {
      if (c[i] != static_cast<float>(i * 3)) return "shrunk broadcast: wrong values";
    }
    std::vector<float> mine(8), all(8 * n);
    for (int i = 0; i < 8; ++i) mine[i] = static_cast<float>(rank_ * 100 + i);
    dist_buffer_t sb = Cpu(mine), rb = Cpu(all);
    if (dist_error_t* e = dist_all_gather(g, &sb, &rb, nullptr)) {
      return "shrunk all_gather: " + Describe(e);
    }
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < 8; ++i) {
        if (all[j * 8 + i] != static_cast<float>(survivors_[j] * 100 + i)) {
          return absl::StrCat("shrunk all_gather: block ", j, " is not old rank ", survivors_[j],
                              "'s");
        }
      }
    }
    return "";
  }

  // The survivors admit one joiner per lost rank and check the grown group.
  std::string Grow(dist_process_group_t* shrunk, Shared* shared) {
    dist_grow_options_t options{sizeof(dist_grow_options_t), kTimeoutMs,
                                static_cast<int32_t>(s_.world - survivors_.size())};
    dist_process_group_t* grown = nullptr;
    if (dist_error_t* e = dist_grow(shrunk, &options, &grown)) return "grow: " + Describe(e);
    const int32_t me = dist_rank(shrunk);
    std::string failed = dist_rank(grown) != me
                             ? absl::StrCat("grown group: rank ", dist_rank(grown), ", want ", me)
                             : CheckGrown(grown, s_.world, shared);
    dist_destroy(grown);
    return failed;
  }

  const Scenario& s_;
  const int rank_;
  std::vector<int> survivors_;
  bool resumed_ = false;
};

// A grown group of `world` ranks: every collective checked against values
// computed from the ranks in it.
std::string CheckGrown(dist_process_group_t* g, int world, Shared* shared) {
  const int n = dist_world_size(g);
  const int me = dist_rank(g);
  if (n != world || me < 0) return absl::StrCat("grown group: rank ", me, " of ", n);
  std::vector<float> v(kCount);
  for (uint64_t i = 0; i < kCount; ++i) v[i] = static_cast<float>((me + 1) * (i % 5 + 1));
  dist_buffer_t b = Cpu(v);
  if (dist_error_t* e = dist_all_reduce(g, &b, &b, DIST_SUM, nullptr)) {
    return "grown all_reduce: " + Describe(e);
  }
  shared->grown_ok_ns[me] = NowNs();
  for (uint64_t i = 0; i < kCount; ++i) {
    if (v[i] != static_cast<float>(n * (n + 1) / 2 * (i % 5 + 1))) {
      return absl::StrCat("grown all_reduce [", i, "]: ", v[i]);
    }
  }
  const int root = n - 1;  // a joiner
  std::vector<float> c(kCount, -1.f);
  if (me == root) {
    for (uint64_t i = 0; i < kCount; ++i) c[i] = static_cast<float>(i * 5);
  }
  dist_buffer_t cb = Cpu(c);
  if (dist_error_t* e = dist_broadcast(g, &cb, &cb, root, nullptr)) {
    return "grown broadcast: " + Describe(e);
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    if (c[i] != static_cast<float>(i * 5)) return "grown broadcast: wrong values";
  }
  std::vector<float> mine(8), all(8 * n);
  for (int i = 0; i < 8; ++i) mine[i] = static_cast<float>(me * 100 + i);
  dist_buffer_t sb = Cpu(mine), rb = Cpu(all);
  if (dist_error_t* e = dist_all_gather(g, &sb, &rb, nullptr)) {
    return "grown all_gather: " + Describe(e);
  }
  for (int j = 0; j < n * 8; ++j) {
    if (all[j] != static_cast<float>(j / 8 * 100 + j % 8)) return "grown all_gather: wrong block";
  }
  return "";
}

// A process started after the failure that joins the job (DIST_JOIN=1).
std::string RunJoiner(const Scenario& s, Shared* shared) {
  setenv("DIST_SURVIVAL", "1", 1);
  setenv("DIST_JOIN", "1", 1);
  const std::string url = s.tcp_port > 0 ? absl::StrCat("tcp://127.0.0.1:", s.tcp_port)
                                         : absl::StrCat("file://", s.dir, "/store");
  dist_init_options_t options = dist_init_options_default();
  options.backend = s.backend.c_str();
  options.init_method = url.c_str();
  options.timeout_ms = kTimeoutMs;
  dist_process_group_t* group = nullptr;
  if (dist_error_t* e = dist_init(&options, &group)) return "joiner's init: " + Describe(e);
  std::string failed = CheckGrown(group, s.world, shared);
  dist_destroy(group);
  return failed;
}

}  // namespace

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(root != nullptr ? root : "/tmp", "/", name);
  std::string command = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
  if (std::system(command.c_str()) != 0) return "";
  return dir;
}

Outcome Run(const Scenario& s) {
  Outcome outcome;
  outcome.rank_errors.assign(s.world, "");
  if (s.world > kMaxWorld || s.victim < 0 || s.victim >= s.world) {
    outcome.rank_errors[0] = "bad scenario";
    return outcome;
  }
  void* memory =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    outcome.rank_errors[0] = absl::StrCat("mmap: ", std::strerror(errno));
    return outcome;
  }
  auto* shared = new (memory) Shared{};
  std::vector<pid_t> pids;
  for (int rank = 0; rank < s.world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string failed = Rank(s, rank).Run(shared);
      std::snprintf(shared->errors[rank], sizeof(shared->errors[rank]), "%s", failed.c_str());
      std::fflush(nullptr);
      _exit(failed.empty() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  const absl::Time deadline = absl::Now() + kJobBound;
  // Joiners have the slots after the ranks' (their rank in the grown group
  // is not known until it is admitted).
  int slots = s.world;
  if (s.grow) {
    while (__atomic_load_n(&shared->failure_ns, __ATOMIC_ACQUIRE) == 0 && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
    }
    for (int r = 0; r < s.world; ++r) {
      if (!s.Lost(r)) continue;
      const int slot = slots++;
      const pid_t pid = fork();
      if (pid == 0) {
        const std::string failed = RunJoiner(s, shared);
        std::snprintf(shared->errors[slot], sizeof(shared->errors[slot]), "%s", failed.c_str());
        std::fflush(nullptr);
        _exit(failed.empty() ? 0 : 1);
      }
      pids.push_back(pid);
    }
  }
  outcome.rank_errors.assign(slots, "");
  std::vector<bool> done(slots, false);
  // Waits for the ranks `wanted` says, until `until`; false when some
  // still run then (each is named hung).
  auto wait_for = [&](auto wanted, absl::Time until) {
    for (;;) {
      int waiting = 0;
      for (int rank = 0; rank < slots; ++rank) {
        if (done[rank] || !wanted(rank)) continue;
        int status = 0;
        if (waitpid(pids[rank], &status, WNOHANG) != pids[rank]) {
          ++waiting;
          continue;
        }
        done[rank] = true;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          outcome.rank_errors[rank] = shared->errors[rank][0] != '\0'
                                          ? shared->errors[rank]
                                          : absl::StrCat("ended with status ", status);
        }
      }
      if (waiting == 0) return true;
      if (absl::Now() > until) {
        for (int rank = 0; rank < slots; ++rank) {
          if (!done[rank] && wanted(rank)) {
            outcome.rank_errors[rank] =
                absl::StrCat("still running after ", absl::FormatDuration(kJobBound), " (hung)");
          }
        }
        return false;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  };
  if (s.resume_victim && s.failure == Failure::kStop) {
    // Resumed once every survivor ran a collective on the shrunk group;
    // they wait for its answer before they leave.
    for (bool shrunk = false; !shrunk && absl::Now() < deadline;) {
      shrunk = true;
      for (int rank = 0; rank < s.world; ++rank) {
        if (!s.Lost(rank) && __atomic_load_n(&shared->first_ok_ns[rank], __ATOMIC_ACQUIRE) == 0) {
          shrunk = false;
        }
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    kill(pids[s.victim], SIGCONT);
    wait_for([](int) { return true; }, deadline);
  } else {
    wait_for([&](int rank) { return rank >= s.world || !s.Lost(rank); }, deadline);
  }
  for (int rank = 0; rank < slots; ++rank) {
    if (done[rank]) continue;
    kill(pids[rank], SIGKILL);
    waitpid(pids[rank], nullptr, 0);
  }
  int64_t first_ok = 0, error = 0;
  for (int rank = 0; rank < s.world; ++rank) {
    if (s.Lost(rank)) continue;
    first_ok = std::max(first_ok, shared->first_ok_ns[rank]);
    error = std::max(error, shared->error_ns[rank]);
  }
  outcome.failure_to_first_collective = absl::Nanoseconds(first_ok - shared->failure_ns);
  outcome.failure_to_error = absl::Nanoseconds(error - shared->failure_ns);
  if (s.grow) {
    int64_t grown_ok = 0;
    for (int rank = 0; rank < s.world; ++rank)
      grown_ok = std::max(grown_ok, shared->grown_ok_ns[rank]);
    outcome.failure_to_grown_collective = absl::Nanoseconds(grown_ok - shared->failure_ns);
  }
  munmap(memory, sizeof(Shared));
  return outcome;
}

}  // namespace dist_survival

// A peer killed in the middle of an all-reduce must never take a survivor
// with it. Before the fix about one survivor in eight died of SIGPIPE (exit
// 141, no message): Gloo writes to the dead peer's socket without
// MSG_NOSIGNAL, and a C/C++ host keeps SIGPIPE's default action. The host's
// disposition is left as it is (default here, as in any C program); the
// plugin blocks SIGPIPE only in its own threads and around its own calls.
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/gloo/gloo_suite.h"

namespace dist_test {
namespace {

constexpr int kRuns = 50;
constexpr int kWorld = 3;
constexpr int kVictim = 1;

// `count` floats per all_reduce: 1 M takes the unbound path (writes on
// Gloo's and the plugin's threads as well as the caller's); 16 the legacy
// classes on synchronous pairs, every write on the caller's thread, through
// the table's `run` when `blocking_run` (no work handle: the plugin's
// Communicator::Run, whose SIGPIPE scope skips collecting after a
// successful operation).
void ExpectNoSurvivorDiesOfASignal(const std::string& name, size_t count, bool blocking_run,
                                   int runs) {
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &before), 0);
  ASSERT_EQ(before.sa_handler, SIG_DFL) << "the test needs SIGPIPE's default action";
  int signaled = 0, failed = 0;
  for (int run = 0; run < runs; ++run) {
    const std::string dir = TempDir(absl::StrCat(name, run));
    auto results = RunRanks(kWorld, absl::Seconds(60), [&](int rank) {
      dist_store_t* store = OpenStore(dir + "/store");
      dist_backend_comm_t* comm = nullptr;
      CommOptions options;
      options.timeout_ms = 3000;
      RANK_OK(rank, CreateComm(store, rank, kWorld, options, &comm));
      std::vector<float> in(count, 1.f), out(in.size());
      dist_op_args_t a = Args();
      a.send = Buffer(in.data(), in.size(), DIST_FLOAT32);
      a.recv = Buffer(out.data(), out.size(), DIST_FLOAT32);
      a.op = DIST_SUM;
      // Then the victim dies inside one of its all-reduces (killed
      // by a child of its own) at a point that varies from run to run.
      const int kill_after_us = 200 + (run * 137) % 3000;
      // One all-reduce first: when it is done every rank has connected.
      auto all_reduce = [&] {
        return blocking_run ? Plugin()->run(comm, DIST_COLL_ALL_REDUCE, &a, 60000)
                            : RunOp(Plugin()->all_reduce, comm, a);
      };
      RANK_OK(rank, all_reduce());
      RANK_CHECK(rank, out[0] == kWorld);
      if (rank == kVictim) {
        pid_t self = getpid();
        if (fork() == 0) {
          usleep(kill_after_us);
          kill(self, SIGKILL);
          _exit(0);
        }
      }
      for (int i = 0; i < 100000; ++i) {
        dist_error_t* e = all_reduce();
        if (e != nullptr) {
          const std::string message = dist_error_message(e);
          dist_error_destroy(e);
          std::fprintf(stderr, "rank %d (run %d): %s\n", rank, run, message.c_str());
          RANK_CHECK(rank, absl::StrContains(message, absl::StrCat("rank ", kVictim)));
          // Neither the disposition nor this thread's mask changed.
          struct sigaction now {};
          RANK_CHECK(rank, sigaction(SIGPIPE, nullptr, &now) == 0 && now.sa_handler == SIG_DFL);
          sigset_t mask;
          RANK_CHECK(rank, pthread_sigmask(SIG_BLOCK, nullptr, &mask) == 0);
          RANK_CHECK(rank, !sigismember(&mask, SIGPIPE));
          Plugin()->comm_destroy(comm);
          return 0;
        }
      }
      return 3;  // the victim was never noticed
    });
    for (int rank = 0; rank < kWorld; ++rank) {
      if (rank == kVictim) continue;
      if (WIFSIGNALED(results[rank].status)) {
        ++signaled;
        ADD_FAILURE() << "run " << run << ": rank " << rank << " " << results[rank].Describe();
      } else if (!results[rank].ok()) {
        ++failed;
        ADD_FAILURE() << "run " << run << ": rank " << rank << " " << results[rank].Describe();
      }
    }
  }
  EXPECT_EQ(signaled, 0);
  EXPECT_EQ(failed, 0);
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_DFL) << "the host's disposition must be left alone";
}

TEST(GlooSigpipe, NoSurvivorOfAKilledPeerDiesOfASignal) {
  // Big enough that writes are in flight when the victim dies.
  ExpectNoSurvivorDiesOfASignal("sigpipe", 1 << 20, /*blocking_run=*/false, kRuns);
}

TEST(GlooSigpipe, NoSurvivorDiesOfASignalOnSynchronousPairs) {
  ExpectNoSurvivorDiesOfASignal("sigpipe_sync", 16, /*blocking_run=*/true, kRuns / 2);
}

}  // namespace
}  // namespace dist_test

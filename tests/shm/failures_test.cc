// Failure behaviour of the shm backend with real forked processes: a killed
// peer, a silent peer, abort, mismatched calls, bad arguments, ranks on
// different hosts, and that no segment is ever left in /dev/shm.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_suite.h"
#include "tests/shm/values.h"

namespace dist_test {
namespace {

dist_op_args_t AllReduceArgs(float* data, uint64_t n) {
  dist_op_args_t a = Args();
  a.send = dist_make_buffer(data, n, DIST_FLOAT32, dist_cpu());
  a.recv = a.send;
  a.op = DIST_SUM;
  return a;
}

// Checks that `error` has `code` and mentions `text`; consumes the error.
bool Is(int rank, dist_error_t* error, dist_error_code_t code, const char* text) {
  const bool ok = error != nullptr && dist_error_code(error) == code &&
                  absl::StrContains(dist_error_message(error), text);
  if (!ok) {
    std::fprintf(stderr, "rank %d: wanted %s containing '%s', got %s: %s\n", rank,
                 dist_error_code_name(code), text, dist_error_code_name(dist_error_code(error)),
                 dist_error_message(error));
  }
  dist_error_destroy(error);
  return ok;
}

TEST(ShmFailures, KilledPeerGivesUnavailableNamingItAndLeavesNoSegment) {
  const std::string store = TempDir("killed") + "/store";
  pid_t leader = 0;
  auto results = RunRanks(
      3, absl::Seconds(60),
      [&](int rank) {
        dist_store_t* s = OpenStore(store, rank, 3);
        dist_backend_comm_t* comm = nullptr;
        CommOptions options;
        options.timeout_ms = 30000;
        RANK_OK(rank, CreateComm(s, rank, 3, options, &comm));
        float data[4] = {1, 2, 3, 4};
        dist_op_args_t a = AllReduceArgs(data, 4);
        RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, a));
        RANK_CHECK(rank, data[0] == 3);
        if (rank == 2) raise(SIGKILL);
        const absl::Time start = absl::Now();
        RANK_CHECK(rank,
                   Is(rank, RunOp(Plugin()->all_reduce, comm, a), DIST_UNAVAILABLE, "rank 2 (pid"));
        // Well inside the 30 s timeout: death is noticed, not waited out.
        RANK_CHECK(rank, absl::Now() - start < absl::Seconds(10));
        // The communicator stays failed, and says why.
        RANK_CHECK(rank, Is(rank, RunOp(Plugin()->barrier, comm, Args()), DIST_UNAVAILABLE,
                            "failed earlier"));
        Plugin()->comm_destroy(comm);
        return 0;
      },
      [&](const std::vector<pid_t>& pids) { leader = pids[0]; });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_TRUE(WIFSIGNALED(results[2].status)) << results[2].Describe();
  EXPECT_TRUE(SegmentsOf(leader).empty());
}

TEST(ShmFailures, PeerKilledInTheMiddleOfAChunkedAllReduce) {
  const std::string store = TempDir("killed-mid") + "/store";
  auto results = RunRanks(3, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 3);
    dist_backend_comm_t* comm = nullptr;
    CommOptions options;
    options.timeout_ms = 30000;
    options.options = {{"shm.slot_bytes", "65536"}};  // 1024 chunks of 64 KiB
    RANK_OK(rank, CreateComm(s, rank, 3, options, &comm));
    RANK_OK(rank, RunOp(Plugin()->barrier, comm, Args()));
    std::vector<float> data(16u << 20, 1.0f);  // 64 MiB
    dist_op_args_t a = AllReduceArgs(data.data(), data.size());
    dist_backend_work_t* work = nullptr;
    RANK_OK(rank, Plugin()->all_reduce(comm, &a, &work));
    if (rank == 2) {
      absl::SleepFor(absl::Milliseconds(5));
      raise(SIGKILL);
    }
    RANK_CHECK(rank, Is(rank, Plugin()->work_wait(work, 30000), DIST_UNAVAILABLE, "rank 2 (pid"));
    Plugin()->work_destroy(work);
    Plugin()->comm_destroy(comm);
    return 0;
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
}

TEST(ShmFailures, KilledSenderFailsThePendingRecv) {
  const std::string store = TempDir("killed-p2p") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, 2, CommOptions(), &comm));
    RANK_OK(rank, RunOp(Plugin()->barrier, comm, Args()));
    if (rank == 1) {
      absl::SleepFor(absl::Milliseconds(200));
      raise(SIGKILL);
    }
    float data[8];
    dist_op_args_t a = RecvArgs(data, 8, DIST_FLOAT32, 1, 5);
    RANK_CHECK(rank, Is(rank, RunOp(Plugin()->recv, comm, a), DIST_UNAVAILABLE, "rank 1 (pid"));
    Plugin()->comm_destroy(comm);
    return 0;
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
}

// The same through run_sendrecv (dist_sendrecv), which moves its send and
// recv on the caller's thread: the dead peer is noticed there, well inside
// the 30 s timeout, and named.
TEST(ShmFailures, KilledPeerFailsASendRecvOnTheCallersThread) {
  const std::string store = TempDir("killed-sendrecv") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    dist_backend_comm_t* comm = nullptr;
    CommOptions options;
    options.timeout_ms = 30000;
    RANK_OK(rank, CreateComm(s, rank, 2, options, &comm));
    RANK_OK(rank, RunOp(Plugin()->barrier, comm, Args()));
    if (rank == 1) {
      absl::SleepFor(absl::Milliseconds(200));
      raise(SIGKILL);
    }
    // More than the ring holds, so the send cannot finish on its own either.
    std::vector<float> out(1u << 20, 1.0f), in(1u << 20);
    dist_op_args_t send = SendArgs(out.data(), out.size(), DIST_FLOAT32, 1, 5);
    dist_op_args_t recv = RecvArgs(in.data(), in.size(), DIST_FLOAT32, 1, 5);
    const absl::Time start = absl::Now();
    RANK_CHECK(rank, Is(rank, Plugin()->run_sendrecv(comm, &send, &recv, 30000), DIST_UNAVAILABLE,
                        "rank 1 (pid"));
    RANK_CHECK(rank, absl::Now() - start < absl::Seconds(10));
    Plugin()->comm_destroy(comm);
    return 0;
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
}

// The last of `ranks` ranks stays alive but never joins an all_reduce with
// a 1 s timeout; the others, running it through `all_reduce`, must get
// DEADLINE_EXCEEDED naming it, at the timeout.
void ExpectSilentPeerNamed(
    const std::string& store, int ranks,
    const std::function<dist_error_t*(dist_backend_comm_t*, const dist_op_args_t&)>& all_reduce) {
  const int silent = ranks - 1;
  const std::string named = absl::StrCat("waiting for rank ", silent, ",");
  auto results = RunRanks(ranks, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, ranks);
    dist_backend_comm_t* comm = nullptr;
    CommOptions options;
    options.timeout_ms = 1000;
    RANK_OK(rank, CreateComm(s, rank, ranks, options, &comm));
    if (rank == silent) {
      absl::SleepFor(absl::Seconds(2));  // alive, but never joins the all_reduce
    } else {
      float data[4] = {1, 2, 3, 4};
      const absl::Time start = absl::Now();
      RANK_CHECK(rank, Is(rank, all_reduce(comm, AllReduceArgs(data, 4)), DIST_DEADLINE_EXCEEDED,
                          named.c_str()));
      const absl::Duration took = absl::Now() - start;
      RANK_CHECK(rank, took >= absl::Milliseconds(900) && took < absl::Seconds(10));
    }
    Plugin()->comm_destroy(comm);
    return 0;
  });
  ExpectAllOk(results);
}

TEST(ShmFailures, SilentPeerGivesDeadlineExceededNamingIt) {
  ExpectSilentPeerNamed(TempDir("silent") + "/store", 3,
                        [](dist_backend_comm_t* comm, const dist_op_args_t& a) {
                          return RunOp(Plugin()->all_reduce, comm, a);
                        });
}

// The same two failures through the table's `run` (ABI 1.2), which runs the
// collective on the caller's thread: a killed peer is named within seconds,
// a silent one at the operation's timeout, and the communicator stays failed.
TEST(ShmFailures, BlockingRunNamesAKilledPeerAndASilentOne) {
  const std::string dir = TempDir("run_failures");
  auto results = RunRanks(3, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(dir + "/store", rank, 3);
    dist_backend_comm_t* comm = nullptr;
    CommOptions options;
    options.timeout_ms = 30000;
    RANK_OK(rank, CreateComm(s, rank, 3, options, &comm));
    const dist_backend_plugin_t* p = Plugin();
    float data[4] = {1, 2, 3, 4};
    dist_op_args_t a = AllReduceArgs(data, 4);
    RANK_OK(rank, p->run(comm, DIST_COLL_ALL_REDUCE, &a, 30000));
    RANK_CHECK(rank, data[0] == 3);
    if (rank == 2) raise(SIGKILL);
    absl::Time start = absl::Now();
    RANK_CHECK(rank, Is(rank, p->run(comm, DIST_COLL_ALL_REDUCE, &a, 30000), DIST_UNAVAILABLE,
                        "rank 2 (pid"));
    RANK_CHECK(rank, absl::Now() - start < absl::Seconds(10));
    const dist_op_args_t barrier = Args();
    RANK_CHECK(rank, Is(rank, p->run(comm, DIST_COLL_BARRIER, &barrier, 30000), DIST_UNAVAILABLE,
                        "failed earlier"));
    p->comm_destroy(comm);
    return 0;
  });
  EXPECT_TRUE(results[0].ok()) << results[0].Describe();
  EXPECT_TRUE(results[1].ok()) << results[1].Describe();
  EXPECT_TRUE(WIFSIGNALED(results[2].status)) << results[2].Describe();

  ExpectSilentPeerNamed(dir + "/store_silent", 2,
                        [](dist_backend_comm_t* comm, const dist_op_args_t& a) {
                          return Plugin()->run(comm, DIST_COLL_ALL_REDUCE, &a, 1000);
                        });
}

TEST(ShmFailures, UnmatchedRecvTimesOutAndWorkWaitTimeoutKeepsWorkPending) {
  const std::string store = TempDir("p2p-timeout") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, 2, CommOptions(), &comm));
    const dist_backend_plugin_t* p = Plugin();
    int32_t value = 0;
    if (rank == 0) {
      // A short work_wait times out but the recv stays pending and completes.
      dist_op_args_t a = Args();
      a.recv = dist_make_buffer(&value, 1, DIST_INT32, dist_cpu());
      a.peer = 1;
      a.tag = 1;
      dist_backend_work_t* work = nullptr;
      RANK_OK(rank, p->recv(comm, &a, &work));
      RANK_CHECK(rank, Is(rank, p->work_wait(work, 50), DIST_DEADLINE_EXCEEDED, "still runs"));
      int done = 1;
      RANK_OK(rank, p->work_test(work, &done));
      RANK_CHECK(rank, done == 0);
      RANK_OK(rank, p->work_wait(work, 20000));
      p->work_destroy(work);
      RANK_CHECK(rank, value == 42);
      // A recv nobody sends to fails at its own timeout, naming the peer.
      a.tag = 2;
      a.timeout_ms = 300;
      RANK_CHECK(rank, Is(rank, RunOp(p->recv, comm, a), DIST_DEADLINE_EXCEEDED,
                          "recv from rank 1 with tag 2"));
    } else {
      absl::SleepFor(absl::Milliseconds(300));
      value = 42;
      dist_op_args_t a = Args();
      a.send = dist_make_buffer(&value, 1, DIST_INT32, dist_cpu());
      a.peer = 0;
      a.tag = 1;
      RANK_OK(rank, RunOp(p->send, comm, a));
      absl::SleepFor(absl::Seconds(1));
    }
    p->comm_destroy(comm);
    return 0;
  });
  ExpectAllOk(results);
}

TEST(ShmFailures, AbortFailsPendingAndLaterOpsAndTellsPeers) {
  const std::string store = TempDir("abort") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, 2, CommOptions(), &comm));
    const dist_backend_plugin_t* p = Plugin();
    RANK_OK(rank, RunOp(p->barrier, comm, Args()));
    if (rank == 0) {
      int32_t value = 0;
      dist_op_args_t a = Args();
      a.recv = dist_make_buffer(&value, 1, DIST_INT32, dist_cpu());
      a.peer = 1;
      dist_backend_work_t* pending_recv = nullptr;
      dist_backend_work_t* pending_barrier = nullptr;
      RANK_OK(rank, p->recv(comm, &a, &pending_recv));
      RANK_OK(rank, p->barrier(comm, &a, &pending_barrier));  // peer joins it late
      std::thread aborter([&] {
        absl::SleepFor(absl::Milliseconds(200));
        p->comm_abort(comm, "test says stop");
      });
      const absl::Time start = absl::Now();
      RANK_CHECK(rank, Is(rank, p->work_wait(pending_recv, 20000), DIST_ABORTED, "test says stop"));
      RANK_CHECK(rank,
                 Is(rank, p->work_wait(pending_barrier, 20000), DIST_ABORTED, "test says stop"));
      RANK_CHECK(rank, absl::Now() - start < absl::Seconds(5));
      aborter.join();
      p->work_destroy(pending_recv);
      p->work_destroy(pending_barrier);
      dist_backend_work_t* later = nullptr;
      RANK_CHECK(rank, Is(rank, p->barrier(comm, &a, &later), DIST_ABORTED, "test says stop"));
      RANK_CHECK(rank, later == nullptr);
      p->comm_abort(comm, "again");  // idempotent
    } else {
      // Rank 0 reached this barrier before its abort; the next one it never
      // reaches, and the peer learns why instead of waiting out its timeout.
      absl::SleepFor(absl::Milliseconds(400));
      RANK_OK(rank, RunOp(p->barrier, comm, Args()));
      const absl::Time start = absl::Now();
      RANK_CHECK(rank, Is(rank, RunOp(p->barrier, comm, Args()), DIST_UNAVAILABLE,
                          "rank 0 aborted its communicator (test says stop)"));
      RANK_CHECK(rank, absl::Now() - start < absl::Seconds(5));
    }
    p->comm_destroy(comm);
    return 0;
  });
  ExpectAllOk(results);
}

TEST(ShmFailures, DestroyWithOutstandingWorkIsBoundedAndTheHandleSurvives) {
  const std::string store = TempDir("destroy") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    dist_backend_comm_t* comm = nullptr;
    CommOptions options;
    options.timeout_ms = 500;
    RANK_OK(rank, CreateComm(s, rank, 2, options, &comm));
    const dist_backend_plugin_t* p = Plugin();
    if (rank == 0) {
      // Rank 1 never joins this all_reduce; destroy must not hang on it.
      float data[4] = {1, 2, 3, 4};
      dist_op_args_t a = AllReduceArgs(data, 4);
      a.timeout_ms = 60000;
      dist_backend_work_t* work = nullptr;
      RANK_OK(rank, p->all_reduce(comm, &a, &work));
      const absl::Time start = absl::Now();
      p->comm_destroy(comm);
      RANK_CHECK(rank, absl::Now() - start < absl::Seconds(10));
      RANK_CHECK(rank, Is(rank, p->work_wait(work, 1000), DIST_ABORTED,
                          "destroyed with work still pending"));
      p->work_destroy(work);
    } else {
      absl::SleepFor(absl::Seconds(2));
      p->comm_destroy(comm);
    }
    return 0;
  });
  ExpectAllOk(results);
}

TEST(ShmFailures, MismatchedCollectivesFailOnEveryRankAndTheCommunicatorRecovers) {
  const std::string store = TempDir("mismatch") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, 2, CommOptions(), &comm));
    float data[5] = {1, 1, 1, 1, 1};
    RANK_CHECK(rank, Is(rank, RunOp(Plugin()->all_reduce, comm, AllReduceArgs(data, 4 + rank)),
                        DIST_INVALID_ARGUMENT, "ranks disagree"));
    RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, AllReduceArgs(data, 4)));
    RANK_CHECK(rank, data[0] == 2 && data[3] == 2);
    // After an empty op against a full one, and after a barrier against an
    // all_reduce, small and chunked all_reduces are still right.
    auto still_right = [&]() {
      for (int round = 0; round < 3; ++round) {
        // Values change every round, so reading a stale half would show.
        std::vector<float> big(300000, static_cast<float>((rank + 1) * (round + 1)));
        RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, AllReduceArgs(big.data(), big.size())));
        for (float v : big) RANK_CHECK(rank, v == 3 * (round + 1));
        float small[3] = {1.0f + round, 2, 3};
        RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, AllReduceArgs(small, 3)));
        RANK_CHECK(rank, small[0] == 2 * (1 + round) && small[2] == 6);
        // 200 bytes: through the slots.
        std::vector<float> lines(50, static_cast<float>(rank + round));
        lines[49] = 7;
        RANK_OK(rank, RunOp(Plugin()->all_reduce, comm, AllReduceArgs(lines.data(), 50)));
        RANK_CHECK(rank,
                   lines[0] == 1 + 2 * round && lines[48] == 1 + 2 * round && lines[49] == 14);
      }
    };
    RANK_CHECK(rank, Is(rank, RunOp(Plugin()->all_reduce, comm, AllReduceArgs(data, rank * 4)),
                        DIST_INVALID_ARGUMENT, "ranks disagree"));
    still_right();
    // Messages up to 32 bytes travel in a flagged line, larger ones in the
    // slots: a flagged message against slotted ones, small and chunked.
    std::vector<float> wide(1000, 1.f);
    for (const uint64_t other : {uint64_t{60}, uint64_t{1000}}) {
      RANK_CHECK(rank, Is(rank,
                          RunOp(Plugin()->all_reduce, comm,
                                AllReduceArgs(wide.data(), rank == 0 ? 4 : other)),
                          DIST_INVALID_ARGUMENT, "ranks disagree"));
      still_right();
    }
    RANK_CHECK(rank, Is(rank,
                        rank == 0 ? RunOp(Plugin()->barrier, comm, Args())
                                  : RunOp(Plugin()->all_reduce, comm, AllReduceArgs(data, 4)),
                        DIST_INVALID_ARGUMENT, "ranks disagree"));
    still_right();
    Plugin()->comm_destroy(comm);
    return 0;
  });
  ExpectAllOk(results);
}

// A rank that only writes a small rooted operation returns without waiting
// (plugins/backends/shm/collectives.h): when its peer called something
// else, the peer finds out, and its failure reaches the writer at its next
// call; nobody hangs, nobody reads another call's data.
TEST(ShmFailures, AMismatchWithARankThatDidNotWaitFailsEveryRank) {
  const std::string store = TempDir("rooted_mismatch") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    const dist_backend_plugin_t* p = Plugin();
    CommOptions options;
    options.timeout_ms = 5000;
    std::vector<int32_t> data(2000, rank + 1);
    auto args = [&](uint64_t n) {
      dist_op_args_t a = Args();
      a.send = Buffer(data.data(), n, DIST_INT32);
      a.recv = a.send;
      a.op = DIST_SUM;
      return a;
    };
    struct Case {
      uint64_t root_count;   // rank 0: broadcast from 0
      bool peer_broadcasts;  // rank 1: broadcast (else all_reduce)
      uint64_t peer_count;
      const char* peer_error;  // what rank 1 gets (FAILED_PRECONDITION)
    };
    const Case cases[] = {
        // Eager cells, against a rank that waits at a barrier.
        {16, false, 16,
         "rank 0 called broadcast(count=16, int32, root=0) but rank 1 called "
         "all_reduce(count=16, int32, op=sum)"},
        // Eager cells, against a reader that expects fewer bytes.
        {16, true, 8,
         "rank 1 called broadcast(count=8, int32, root=0) but rank 0 called "
         "broadcast(count=16, int32, root=0)"},
        // One unit of slots (8000 bytes), against a rank that waits.
        {2000, false, 2000,
         "rank 0 called broadcast(count=2000, int32, root=0) but rank 1 called "
         "all_reduce(count=2000, int32, op=sum)"},
    };
    for (const Case& c : cases) {
      dist_backend_comm_t* comm = nullptr;
      RANK_OK(rank, CreateComm(s, rank, 2, options, &comm));
      if (rank == 0) {
        RANK_OK(rank, RunOp(p->broadcast, comm, args(c.root_count)));
        // Its next call fails: the peer's failure, or its own check of the
        // call it did not wait for (slots), both naming the two calls.
        dist_error_t* next = RunOp(p->all_reduce, comm, args(4));
        RANK_CHECK(rank, next != nullptr);
        const std::string message = dist_error_message(next);
        dist_error_destroy(next);
        if (!absl::StrContains(message, "ranks disagree on the collective") ||
            !absl::StrContains(message, absl::StrCat("rank 0 called broadcast(count=", c.root_count,
                                                     ", int32, root=0)"))) {
          std::fprintf(stderr, "rank 0: got %s\n", message.c_str());
          std::_Exit(1);
        }
      } else {
        RANK_CHECK(rank, Is(rank,
                            RunOp(c.peer_broadcasts ? p->broadcast : p->all_reduce, comm,
                                  args(c.peer_count)),
                            DIST_FAILED_PRECONDITION, c.peer_error));
      }
      p->comm_destroy(comm);
    }
    s->release(s->ctx);
    return 0;
  });
  ExpectAllOk(results);
}

TEST(ShmFailures, BadArgumentsAndCudaBuffersAreRefusedAtIssue) {
  const std::string store = TempDir("args") + "/store";
  auto results = RunRanks(1, absl::Seconds(30), [&](int rank) {
    dist_store_t* s = OpenStore(store, 0, 1);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, 0, 1, CommOptions(), &comm));
    const dist_backend_plugin_t* p = Plugin();
    float data[4] = {1, 2, 3, 4};
    dist_backend_work_t* work = nullptr;
    dist_op_args_t a = AllReduceArgs(data, 4);
    a.send.device = dist_cuda(0);
    a.recv.device = dist_cuda(0);  // (mixed devices fail the common checks first)
    RANK_CHECK(rank, Is(rank, p->all_reduce(comm, &a, &work), DIST_UNIMPLEMENTED, "nccl"));
    a = AllReduceArgs(data, 4);
    a.op = DIST_BXOR;
    RANK_CHECK(rank, Is(rank, p->all_reduce(comm, &a, &work), DIST_INVALID_ARGUMENT, "bitwise"));
    a = AllReduceArgs(data, 4);
    a.recv.count = 3;
    RANK_CHECK(rank, Is(rank, p->all_reduce(comm, &a, &work), DIST_INVALID_ARGUMENT, "recv count"));
    a = AllReduceArgs(data, 4);
    a.root = 1;
    RANK_CHECK(rank, Is(rank, p->broadcast(comm, &a, &work), DIST_INVALID_ARGUMENT, "root 1"));
    a.peer = 0;
    RANK_CHECK(rank, Is(rank, p->send(comm, &a, &work), DIST_INVALID_ARGUMENT, "another rank"));
    RANK_CHECK(rank, work == nullptr);
    // World size 1 works: every collective is a local copy.
    a = AllReduceArgs(data, 4);
    a.op = DIST_AVG;
    RANK_OK(rank, RunOp(p->all_reduce, comm, a));
    RANK_CHECK(rank, data[0] == 1 && data[3] == 4);
    p->comm_destroy(comm);
    return 0;
  });
  ExpectAllOk(results);
}

TEST(ShmFailures, RanksOnDifferentHostsAreRefusedClearly) {
  const std::string store = TempDir("hosts") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    if (rank == 1) {
      // Pretend to be elsewhere: publish another host identity, then wait
      // for rank 0's verdict through the store as the plugin would.
      const char fake[] = "host=elsewhere boot=0 pidns=0 shm=0";
      RANK_OK(rank, s->set(s->ctx, "shm/host/1", fake, sizeof(fake) - 1));
      void* value = nullptr;
      size_t size = 0;
      RANK_OK(rank, s->get(s->ctx, "shm/segment", 20000, &value, &size));
      const std::string verdict(static_cast<char*>(value), size);
      s->free_value(s->ctx, value);
      RANK_CHECK(rank, absl::StartsWith(verdict, "error:"));
      return 0;
    }
    dist_backend_comm_t* comm = nullptr;
    RANK_CHECK(rank, Is(rank, CreateComm(s, 0, 2, CommOptions(), &comm), DIST_FAILED_PRECONDITION,
                        "every rank on one host"));
    RANK_CHECK(rank, comm == nullptr);
    RANK_CHECK(rank, SegmentsOf(getpid()).empty());
    return 0;
  });
  ExpectAllOk(results);
}

TEST(ShmFailures, RankThatNeverAttachesTimesOutAndLeavesNoSegment) {
  const std::string store = TempDir("no-attach") + "/store";
  auto results = RunRanks(2, absl::Seconds(60), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    if (rank == 1) {
      // Passes the host check (copies rank 0's identity) but never maps the
      // segment: rank 0 gives up and removes it.
      void* value = nullptr;
      size_t size = 0;
      RANK_OK(rank, s->get(s->ctx, "shm/host/0", 20000, &value, &size));
      RANK_OK(rank, s->set(s->ctx, "shm/host/1", value, size));
      s->free_value(s->ctx, value);
      absl::SleepFor(absl::Seconds(2));
      return 0;
    }
    dist_backend_comm_t* comm = nullptr;
    CommOptions options;
    options.timeout_ms = 800;
    RANK_CHECK(rank, Is(rank, CreateComm(s, 0, 2, options, &comm), DIST_DEADLINE_EXCEEDED,
                        "comm_create (attaching the shared memory segment) on group 'test' timed "
                        "out after 800 ms at rank 0 waiting for rank 1,"));
    RANK_CHECK(rank, SegmentsOf(getpid()).empty());
    return 0;
  });
  ExpectAllOk(results);
}

}  // namespace
}  // namespace dist_test

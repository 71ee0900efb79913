// send/recv that a waiting caller moves on its own thread (the shm
// communicator's TryRunInline) and what it must hand back to the worker:
// real forked processes, data checked element by element.
#include <sys/resource.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_suite.h"

namespace dist_test {
namespace {

// Every operation has 4 s; each scenario below finishes in well under one
// when nothing is left unmoved, and one that is fails with a timeout.
CommOptions ShortTimeoutSmallRings() {
  CommOptions options;
  options.timeout_ms = 4000;
  options.options = {{"shm.ring_bytes", "4096"}};
  return options;
}

// Runs `body(rank, comm)` on 2 forked ranks, each on a communicator with
// `options` (ShortTimeoutSmallRings unless given), and expects both to
// succeed.
template <typename Body>
void OnTwoRanks(const std::string& name, Body body,
                const CommOptions& options = ShortTimeoutSmallRings()) {
  OnRanks(2, name, options, body);
}

// Rank 1's side of the next two tests: a barrier, then 42 to rank 0.
void BarrierThenSend(int rank, dist_backend_comm_t* comm) {
  const dist_backend_plugin_t* p = Plugin();
  RANK_OK(rank, RunOp(p->barrier, comm, Args()));
  int32_t value = 42;
  RANK_OK(rank, RunOp(p->send, comm, SendArgs(&value, 1, DIST_INT32, 0, 5)));
}

// Rank 0's wait for a small recv posts a large send with it and moves both;
// the recv ends first, with most of the send still to go through a 4 KiB
// ring, and the worker (asleep: nothing was issued for 60 ms) must move the
// rest while rank 0 waits for the send without running it. (Whether the
// caller or the worker takes the two first is a race; over five rounds
// the caller usually wins some.)
TEST(ShmSendRecv, ASendLeftByTheCallersWaitIsMovedByTheWorker) {
  OnTwoRanks("leftover", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const uint64_t big = 100000;  // 400 KB: about a hundred ring-fulls
    for (int round = 0; round < 5; ++round) {
      std::vector<float> large(big);
      int32_t small = 0;
      absl::SleepFor(absl::Milliseconds(60));
      const absl::Time start = absl::Now();
      if (rank == 0) {
        for (uint64_t i = 0; i < big; ++i) large[i] = static_cast<float>(round * 1000000 + i);
        dist_op_args_t send = SendArgs(large.data(), big, DIST_FLOAT32, 1, 1);
        dist_op_args_t recv = RecvArgs(&small, 1, DIST_INT32, 1, 2);
        dist_backend_work_t* send_work = nullptr;
        dist_backend_work_t* recv_work = nullptr;
        RANK_OK(rank, p->send(comm, &send, &send_work));
        RANK_OK(rank, p->recv(comm, &recv, &recv_work));
        RANK_OK(rank, p->work_wait(recv_work, 10000));
        RANK_CHECK(rank, small == 100 + round);
        RANK_OK(rank, p->work_wait(send_work, 10000));
        p->work_destroy(recv_work);
        p->work_destroy(send_work);
      } else {
        small = 100 + round;
        RANK_OK(rank, RunOp(p->send, comm, SendArgs(&small, 1, DIST_INT32, 0, 2)));
        absl::SleepFor(absl::Milliseconds(50));  // rank 0's recv is done by now
        RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(large.data(), big, DIST_FLOAT32, 0, 1)));
        for (uint64_t i = 0; i < big; ++i) {
          RANK_CHECK(rank, large[i] == static_cast<float>(round * 1000000 + i));
        }
      }
      RANK_CHECK(rank, absl::Now() - start < absl::Seconds(3));
    }
  });
}

// A recv waited for must not hold back a collective issued after it: the
// peer sends only once that barrier is over.
TEST(ShmSendRecv, AWaitedRecvDoesNotHoldBackABarrierIssuedAfterIt) {
  OnTwoRanks("behind", [](int rank, dist_backend_comm_t* comm) {
    const absl::Time start = absl::Now();
    if (rank == 0) {
      const dist_backend_plugin_t* p = Plugin();
      int32_t value = 0;
      dist_op_args_t recv = RecvArgs(&value, 1, DIST_INT32, 1, 5);
      dist_op_args_t barrier = Args();
      dist_backend_work_t* recv_work = nullptr;
      dist_backend_work_t* barrier_work = nullptr;
      RANK_OK(rank, p->recv(comm, &recv, &recv_work));
      RANK_OK(rank, p->barrier(comm, &barrier, &barrier_work));
      RANK_OK(rank, p->work_wait(recv_work, 10000));
      RANK_CHECK(rank, value == 42);
      RANK_OK(rank, p->work_wait(barrier_work, 10000));
      p->work_destroy(recv_work);
      p->work_destroy(barrier_work);
    } else {
      BarrierThenSend(rank, comm);
    }
    RANK_CHECK(rank, absl::Now() - start < absl::Seconds(3));
  });
}

// The same with the barrier issued by a second thread while the first
// waits for (and moves) its recv.
TEST(ShmSendRecv, ABarrierFromAnotherThreadRunsWhileARecvIsWaitedFor) {
  OnTwoRanks("threads", [](int rank, dist_backend_comm_t* comm) {
    const absl::Time start = absl::Now();
    if (rank == 0) {
      const dist_backend_plugin_t* p = Plugin();
      int32_t value = 0;
      dist_error_t* barrier_error = nullptr;
      std::thread second([&] {
        absl::SleepFor(absl::Milliseconds(100));  // the recv is being waited for
        barrier_error = RunOp(p->barrier, comm, Args());
      });
      dist_error_t* recv_error = RunOp(p->recv, comm, RecvArgs(&value, 1, DIST_INT32, 1, 5));
      second.join();
      RANK_OK(rank, recv_error);
      RANK_OK(rank, barrier_error);
      RANK_CHECK(rank, value == 42);
    } else {
      BarrierThenSend(rank, comm);
    }
    RANK_CHECK(rank, absl::Now() - start < absl::Seconds(3));
  });
}

// A small send issued on a quiet communicator is posted by the issuing
// thread: done when the call returns, before anyone waits for it, so a
// caller that computes before waiting does not hold its peer back. (Quiet:
// the worker may have run the barrier, when its caller came to wait for it
// late, and then needs a moment to note that it is free; under
// ThreadSanitizer the send came within that moment in one run of ten.)
TEST(ShmSendRecv, ASmallSendIsDoneWhenIssued) {
  OnTwoRanks("eager", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    for (int round = 0; round < 3; ++round) {
      RANK_OK(rank, RunOp(p->barrier, comm, Args()));
      int32_t value = 0;
      if (rank == 0) {
        value = 7 + round;
        absl::SleepFor(absl::Milliseconds(20));
        dist_op_args_t send = SendArgs(&value, 1, DIST_INT32, 1, 3);
        dist_backend_work_t* work = nullptr;
        RANK_OK(rank, p->send(comm, &send, &work));
        int done = 0;
        RANK_OK(rank, p->work_test(work, &done));
        RANK_CHECK(rank, done == 1);
        RANK_OK(rank, p->work_wait(work, 10000));
        p->work_destroy(work);
      } else {
        RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(&value, 1, DIST_INT32, 0, 3)));
        RANK_CHECK(rank, value == 7 + round);
      }
    }
  });
}

// run_sendrecv (dist_sendrecv) on a communicator with a recv already in
// flight: it cannot take the caller's fast path, so it issues both and
// waits; the exchange (400 KB each way through 4 KiB rings, both ranks at
// once) and the earlier recv both arrive intact.
TEST(ShmSendRecv, ASendRecvBehindPendingWorkIsIssuedAndWaitedFor) {
  OnTwoRanks("sendrecv_behind", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const int peer = 1 - rank;
    const uint64_t big = 100000;
    for (int round = 0; round < 3; ++round) {
      std::vector<float> out(big), in(big, -1.0f);
      for (uint64_t i = 0; i < big; ++i)
        out[i] = static_cast<float>(rank * 1000000 + round * 7 + i);
      int32_t early = 0;
      dist_backend_work_t* early_work = nullptr;
      if (rank == 0) {
        dist_op_args_t recv = RecvArgs(&early, 1, DIST_INT32, 1, 9);
        RANK_OK(rank, p->recv(comm, &recv, &early_work));
      }
      const absl::Time start = absl::Now();
      dist_op_args_t send = SendArgs(out.data(), big, DIST_FLOAT32, peer, 5);
      dist_op_args_t recv = RecvArgs(in.data(), big, DIST_FLOAT32, peer, 5);
      RANK_OK(rank, p->run_sendrecv(comm, &send, &recv, 10000));
      RANK_CHECK(rank, absl::Now() - start < absl::Seconds(3));
      for (uint64_t i = 0; i < big; ++i) {
        RANK_CHECK(rank, in[i] == static_cast<float>(peer * 1000000 + round * 7 + i));
      }
      if (rank == 1) {
        int32_t value = 42 + round;
        RANK_OK(rank, RunOp(p->send, comm, SendArgs(&value, 1, DIST_INT32, 0, 9)));
      } else {
        RANK_OK(rank, p->work_wait(early_work, 10000));
        p->work_destroy(early_work);
        RANK_CHECK(rank, early == 42 + round);
      }
    }
  });
}

// run_sendrecv's fast path (PointToPoint::SendNow/TryRecvNow) copies whole
// messages straight into and out of the rings. Sizes that do not divide the
// 4 KiB ring make messages wrap around its end at every offset; 4080 bytes
// fill the ring to its last byte (16 of header), 5000 cannot fit and stream
// through the engine; every seventh round one rank comes late, past the
// peer's spin, so its recv goes to the engine with the send already done.
TEST(ShmSendRecv, SendRecvsThatWrapTheRingOrComeLateArriveIntact) {
  OnTwoRanks("sendrecv_wrap", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const int peer = 1 - rank;
    const uint64_t sizes[] = {1, 3, 17, 600, 1001, 2047, 4080, 0, 5000, 333};
    auto byte = [](int from, int round, uint64_t i) {
      return static_cast<uint8_t>(from * 101 + round * 7 + i * 13 + (i >> 8));
    };
    for (int round = 0; round < 210; ++round) {
      const uint64_t bytes = sizes[round % 10];
      std::vector<uint8_t> out(bytes), in(bytes + 1, 0xEE);
      for (uint64_t i = 0; i < bytes; ++i) out[i] = byte(rank, round, i);
      if (round % 7 == 3 && rank == round % 2) absl::SleepFor(absl::Milliseconds(5));
      dist_op_args_t send = SendArgs(out.data(), bytes, DIST_UINT8, peer, round);
      dist_op_args_t recv = RecvArgs(in.data(), bytes, DIST_UINT8, peer, round);
      RANK_OK(rank, p->run_sendrecv(comm, &send, &recv, 10000));
      for (uint64_t i = 0; i < bytes; ++i) RANK_CHECK(rank, in[i] == byte(peer, round, i));
      RANK_CHECK(rank, in[bytes] == 0xEE);  // nothing past the message
    }
  });
}

// Twelve operations issued on an idle communicator before the first wait:
// the waiting caller takes them all and runs them on its own thread
// (Communicator::TryRunInline). Each must really be run: a send sent and a
// recv received, not marked done (RunSendRecv once read a flag past its
// array of four for the fifth on, and completed operations it never ran).
TEST(ShmSendRecv, MoreThanFourOperationsIssuedBeforeAWaitAreAllRun) {
  OnTwoRanks("many_issued", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const int peer = 1 - rank;
    constexpr int kEach = 6;
    for (int round = 0; round < 20; ++round) {
      int32_t in[kEach], out[kEach];
      std::vector<dist_backend_work_t*> works;
      for (int i = 0; i < kEach; ++i) {
        in[i] = -1;
        works.push_back(Issue(rank, p->recv, comm, RecvArgs(&in[i], 1, DIST_INT32, peer, i)));
      }
      for (int i = 0; i < kEach; ++i) {
        out[i] = 1000 * rank + 10 * round + i;
        works.push_back(Issue(rank, p->send, comm, SendArgs(&out[i], 1, DIST_INT32, peer, i)));
      }
      WaitAll(rank, works);
      for (int i = 0; i < kEach; ++i) RANK_CHECK(rank, in[i] == 1000 * peer + 10 * round + i);
    }
  });
}

// A sender starts its next message over at the ring's
// start (PointToPoint::StartOfMessage), and the receiver follows its skip.
// On a 64 KiB ring: sendrecvs of sizes that cross pages (the callers' fast
// paths skip and follow); bursts of sends issued before their recvs, more
// than the ring holds, so it wraps and the engine skips where the receiver
// has read far enough; bursts whose recvs come late, read by the engine as
// early messages; every message checked byte by byte.
TEST(ShmSendRecv, MessagesThatRestartAtTheRingsStartArriveIntact) {
  CommOptions options = ShortTimeoutSmallRings();
  options.options = {{"shm.ring_bytes", "65536"}};
  OnTwoRanks(
      "sendrecv_restart",
      [](int rank, dist_backend_comm_t* comm) {
        const dist_backend_plugin_t* p = Plugin();
        const int peer = 1 - rank;
        const uint64_t sizes[] = {8, 3000, 4100, 700, 20000, 40000, 5, 65000, 12000, 0, 33000};
        auto byte = [](int from, int tag, uint64_t i) {
          return static_cast<uint8_t>(from * 101 + tag * 7 + i * 13 + (i >> 8));
        };
        auto fill = [&](int from, int tag, uint64_t bytes) {
          std::vector<uint8_t> v(bytes);
          for (uint64_t i = 0; i < bytes; ++i) v[i] = byte(from, tag, i);
          return v;
        };
        auto check = [&](const std::vector<uint8_t>& in, int from, int tag, uint64_t bytes) {
          for (uint64_t i = 0; i < bytes; ++i) RANK_CHECK(rank, in[i] == byte(from, tag, i));
          RANK_CHECK(rank, in[bytes] == 0xEE);  // nothing past the message
        };
        int tag = 0;
        for (int round = 0; round < 12; ++round) {
          for (int i = 0; i < 33; ++i, ++tag) {  // exchanges: each ring empty at each send
            const uint64_t bytes = sizes[(i + round) % 11];
            std::vector<uint8_t> out = fill(rank, tag, bytes), in(bytes + 1, 0xEE);
            dist_op_args_t send = SendArgs(out.data(), bytes, DIST_UINT8, peer, tag);
            dist_op_args_t recv = RecvArgs(in.data(), bytes, DIST_UINT8, peer, tag);
            RANK_OK(rank, p->run_sendrecv(comm, &send, &recv, 10000));
            check(in, peer, tag, bytes);
          }
          // A burst from rank 0: 24 sends issued at once (more than the
          // ring holds), received on time in odd rounds and late in even
          // ones (the engine buffers what it finds).
          const int first = tag;
          if (rank == 0) {
            std::vector<std::vector<uint8_t>> outs;
            std::vector<dist_backend_work_t*> works;
            for (int i = 0; i < 24; ++i) {
              const uint64_t bytes = sizes[(i * 5 + round) % 11];
              outs.push_back(fill(0, first + i, bytes));
              works.push_back(Issue(rank, p->send, comm,
                                    SendArgs(outs.back().data(), bytes, DIST_UINT8, 1, first + i)));
            }
            WaitAll(rank, works);
          } else {
            if (round % 2 == 0) absl::SleepFor(absl::Milliseconds(20));
            for (int i = 0; i < 24; ++i) {
              const uint64_t bytes = sizes[(i * 5 + round) % 11];
              std::vector<uint8_t> in(bytes + 1, 0xEE);
              RANK_OK(rank,
                      RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, 0, first + i)));
              check(in, 0, first + i, bytes);
            }
          }
          tag += 24;
        }
      },
      options);
}

// A message with another tag ahead of the sendrecv's in the ring is left to
// the engine (buffered as early, for the recv that asks for it later), and
// one of another size fails the recv with both sizes named; the ring stays
// in step, so the next exchange is intact.
TEST(ShmSendRecv, ASendRecvBehindAnotherTagOrSizeLeavesItToTheEngine) {
  OnTwoRanks("sendrecv_order", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const int peer = 1 - rank;
    int32_t first = 0;
    if (rank == 1) {
      first = 77;
      RANK_OK(rank, RunOp(p->send, comm, SendArgs(&first, 1, DIST_INT32, 0, 1)));
    }
    int32_t out = 10 + rank, in = 0;
    dist_op_args_t send = SendArgs(&out, 1, DIST_INT32, peer, 2);
    dist_op_args_t recv = RecvArgs(&in, 1, DIST_INT32, peer, 2);
    RANK_OK(rank, p->run_sendrecv(comm, &send, &recv, 10000));
    RANK_CHECK(rank, in == 10 + peer);
    if (rank == 0) {
      RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(&first, 1, DIST_INT32, 1, 1)));
      RANK_CHECK(rank, first == 77);
    }

    // Rank 1 sends two int32 where rank 0 expects one.
    int32_t pair[2] = {5, 6};
    int32_t one = 0;
    send = SendArgs(pair, rank == 1 ? 2 : 1, DIST_INT32, peer, 3);
    recv = RecvArgs(&one, 1, DIST_INT32, peer, 3);
    dist_error_t* error = p->run_sendrecv(comm, &send, &recv, 10000);
    if (rank == 1) {
      RANK_OK(rank, error);
      RANK_CHECK(rank, one == 5);
    } else {
      RANK_CHECK(rank, error != nullptr && dist_error_code(error) == DIST_INVALID_ARGUMENT);
      const std::string message = error != nullptr ? dist_error_message(error) : "";
      dist_error_destroy(error);
      RANK_CHECK(rank, message.find("expected 4 bytes but the matching send carried 8") !=
                           std::string::npos);
    }

    out = 20 + rank;
    send = SendArgs(&out, 1, DIST_INT32, peer, 4);
    recv = RecvArgs(&in, 1, DIST_INT32, peer, 4);
    RANK_OK(rank, p->run_sendrecv(comm, &send, &recv, 10000));
    RANK_CHECK(rank, in == 20 + peer);
  });
}

// The classic irecv, isend, wait, wait: the waiting caller writes the send
// into its ring first, then takes the recv. Here the recv's message was
// buffered earlier (it arrived ahead of another tag), so the recv goes to
// the engine and completes as it is posted; the send, written before it and
// issued after it, must still be published (the wait for it returns at
// once, not after its timeout).
TEST(ShmSendRecv, ASendWrittenBehindARecvThatCompletesAtOnceIsPublished) {
  OnTwoRanks("recv_then_send", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const int peer = 1 - rank;
    for (int round = 0; round < 3; ++round) {
      if (rank == 1) {
        int32_t first = 100 + round, second = 200 + round;
        RANK_OK(rank, RunOp(p->send, comm, SendArgs(&first, 1, DIST_INT32, 0, 1)));
        RANK_OK(rank, RunOp(p->send, comm, SendArgs(&second, 1, DIST_INT32, 0, 2)));
      } else {
        int32_t second = 0;  // buffers tag 1 as early on the way
        RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(&second, 1, DIST_INT32, 1, 2)));
        RANK_CHECK(rank, second == 200 + round);
      }
      int32_t out = 10 * rank + round, in = 0;
      dist_op_args_t recv = RecvArgs(&in, 1, DIST_INT32, peer, rank == 0 ? 1 : 3);
      dist_op_args_t send = SendArgs(&out, 1, DIST_INT32, peer, 3);
      dist_backend_work_t* recv_work = nullptr;
      dist_backend_work_t* send_work = nullptr;
      if (rank == 0) {
        RANK_OK(rank, p->recv(comm, &recv, &recv_work));
        RANK_OK(rank, p->send(comm, &send, &send_work));
        const absl::Time start = absl::Now();
        RANK_OK(rank, p->work_wait(recv_work, 10000));
        RANK_OK(rank, p->work_wait(send_work, 10000));
        RANK_CHECK(rank, absl::Now() - start < absl::Seconds(2));
        RANK_CHECK(rank, in == 100 + round);
      } else {
        RANK_OK(rank, p->recv(comm, &recv, &recv_work));
        RANK_OK(rank, p->work_wait(recv_work, 10000));
        RANK_CHECK(rank, in == round);
      }
      p->work_destroy(recv_work);
      if (send_work != nullptr) p->work_destroy(send_work);
    }
  });
}

// A sendrecv whose peer never sends fails with the recv's own timeout (the
// communicator's 4 s, not the caller's longer wait), naming the peer; its
// send, which the peer received, succeeded.
TEST(ShmSendRecv, ASendRecvWhosePeerNeverSendsTimesOutNamingIt) {
  OnTwoRanks("sendrecv_silent", [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    int32_t out = 11, in = 0;
    if (rank == 0) {
      const absl::Time start = absl::Now();
      dist_op_args_t send = SendArgs(&out, 1, DIST_INT32, 1, 5);
      dist_op_args_t recv = RecvArgs(&in, 1, DIST_INT32, 1, 5);
      dist_error_t* error = p->run_sendrecv(comm, &send, &recv, 20000);
      const absl::Duration took = absl::Now() - start;
      RANK_CHECK(rank, error != nullptr && dist_error_code(error) == DIST_DEADLINE_EXCEEDED);
      const std::string message = error != nullptr ? dist_error_message(error) : "";
      dist_error_destroy(error);
      RANK_CHECK(rank, message.find("rank 1 is alive but did not send") != std::string::npos);
      RANK_CHECK(rank, took >= absl::Seconds(3) && took < absl::Seconds(12));
    } else {
      RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(&in, 1, DIST_INT32, 0, 5)));
      RANK_CHECK(rank, in == 11);
      absl::SleepFor(absl::Seconds(6));  // alive, silent, until rank 0 gave up
    }
  });
}

// Sanitizers reserve terabytes of address space and abort on a failed
// allocation instead of throwing: the next test runs in the plain build only.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// The address space this process has mapped now, in bytes.
uint64_t MappedBytes() {
  unsigned long long pages = 0;
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f != nullptr) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * 4096;
}

// A message that arrives before its recv, too large for the memory the
// receiver may still have, is read off the ring and dropped: its recv fails
// with RESOURCE_EXHAUSTED naming it, the host is not terminated by an
// uncaught std::bad_alloc, and the messages after it still arrive.
TEST(ShmSendRecv, AnEarlyMessageTooLargeToBufferFailsItsRecvNotTheProcess) {
  if (kSanitized) GTEST_SKIP() << "address-space limits do not apply under sanitizers";
  CommOptions options;  // default 1 MiB rings: 256 of them to drain
  options.timeout_ms = 30000;
  OnTwoRanks(
      "early_oom",
      [](int rank, dist_backend_comm_t* comm) {
        const dist_backend_plugin_t* p = Plugin();
        constexpr uint64_t kBig = uint64_t{256} << 20;
        if (rank == 0) {
          std::vector<char> big(kBig, 7);
          RANK_OK(rank, RunOp(p->send, comm, SendArgs(big.data(), kBig, DIST_UINT8, 1, 1)));
          int32_t after = 9;
          RANK_OK(rank, RunOp(p->send, comm, SendArgs(&after, 1, DIST_INT32, 1, 2)));
        } else {
          rlimit old{};
          RANK_CHECK(rank, getrlimit(RLIMIT_AS, &old) == 0);
          rlimit tight = old;
          tight.rlim_cur = MappedBytes() + (uint64_t{96} << 20);
          RANK_CHECK(rank, setrlimit(RLIMIT_AS, &tight) == 0);
          // Waiting for tag 2 reads tag 1 first, as an early message.
          int32_t after = 0;
          RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(&after, 1, DIST_INT32, 0, 2)));
          RANK_CHECK(rank, after == 9);
          char one = 0;
          dist_op_args_t recv = RecvArgs(&one, 1, DIST_UINT8, 0, 1);
          dist_error_t* error = RunOp(p->recv, comm, recv);
          RANK_CHECK(rank, setrlimit(RLIMIT_AS, &old) == 0);
          RANK_CHECK(rank, error != nullptr && dist_error_code(error) == DIST_RESOURCE_EXHAUSTED);
          const std::string message = error != nullptr ? dist_error_message(error) : "";
          dist_error_destroy(error);
          RANK_CHECK(rank,
                     message.find("268435456 bytes from rank 0 with tag 1") != std::string::npos);
          RANK_CHECK(rank, message.find("could not be buffered") != std::string::npos);
        }
      },
      options);
}

}  // namespace
}  // namespace dist_test

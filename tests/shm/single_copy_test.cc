// send/recv by reference (plugins/backends/shm/single_copy.h): the receiver
// reads a large message straight out of the sender's buffer. Real forked
// processes; every byte checked against a pattern computed on each side.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_suite.h"

namespace dist_test {
namespace {

constexpr uint64_t kByReference = 256 << 10;  // the plugin's default threshold

// Every operation has 4 s; each scenario finishes in well under one unless
// a message is never taken.
CommOptions ShortTimeout(const std::string& single_copy_bytes = "") {
  CommOptions options;
  options.timeout_ms = 4000;
  if (!single_copy_bytes.empty()) options.options = {{"shm.single_copy_bytes", single_copy_bytes}};
  return options;
}

uint8_t Byte(int from, int round, uint64_t i) {
  return static_cast<uint8_t>(from * 101 + round * 7 + i * 13 + (i >> 9));
}
std::vector<uint8_t> Pattern(int from, int round, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  for (uint64_t i = 0; i < bytes; ++i) out[i] = Byte(from, round, i);
  return out;
}
// Checks the message and the guard byte after it.
bool Intact(const std::vector<uint8_t>& in, int from, int round, uint64_t bytes) {
  for (uint64_t i = 0; i < bytes; ++i) {
    if (in[i] != Byte(from, round, i)) return false;
  }
  return in[bytes] == 0xEE;
}

// Issues a send of `bytes` at `data` to `peer` with `tag`; returns its work.
dist_backend_work_t* IssueSend(int rank, dist_backend_comm_t* comm, void* data, uint64_t bytes,
                               int peer, int64_t tag) {
  dist_op_args_t send = SendArgs(data, bytes, DIST_UINT8, peer, tag);
  dist_backend_work_t* work = nullptr;
  RANK_OK(rank, Plugin()->send(comm, &send, &work));
  return work;
}

// OnRanks (shm_suite.h) with the body after a barrier: a rank probes
// whether it can read each peer (single_copy.h) during create, and until it
// has, its peers send to it through the ring.
template <typename Body>
void OnRanksAfterBarrier(int world, const std::string& name, const CommOptions& options,
                         Body body) {
  OnRanks(world, name, options, [&](int rank, dist_backend_comm_t* comm) {
    RANK_OK(rank, RunOp(Plugin()->barrier, comm, Args()));
    body(rank, comm);
  });
}

// Whether a send of `bytes` to a peer that is busy elsewhere (not in any
// call) is complete after 100 ms: through the ring it is done when written;
// by reference only once the receiver has read it.
void SendCompletesWithoutTheReceiver(const CommOptions& options, bool expected) {
  auto body = [expected](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const uint64_t bytes = kByReference + 4096;
    if (rank == 0) {
      std::vector<uint8_t> out = Pattern(0, 1, bytes);
      dist_backend_work_t* work = IssueSend(rank, comm, out.data(), bytes, 1, 1);
      absl::SleepFor(absl::Milliseconds(100));
      int done = 0;
      RANK_OK(rank, p->work_test(work, &done));
      RANK_CHECK(rank, (done != 0) == expected);
      RANK_OK(rank, p->work_wait(work, 4000));
      p->work_destroy(work);
      int32_t ack = 0;
      RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(&ack, 1, DIST_INT32, 1, 2)));
      RANK_CHECK(rank, ack == 7);
    } else {
      absl::SleepFor(
          absl::Milliseconds(1000));  // busy: no call into dist (rank 0 checks at 100 ms)
      std::vector<uint8_t> in(bytes + 1, 0xEE);
      RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, 0, 1)));
      RANK_CHECK(rank, Intact(in, 0, 1, bytes));
      int32_t ack = 7;
      RANK_OK(rank, RunOp(p->send, comm, SendArgs(&ack, 1, DIST_INT32, 0, 2)));
    }
  };
  OnRanksAfterBarrier(2, expected ? "ring" : "reference", options, body);
}

TEST(ShmSingleCopy, ALargeSendIsDoneOnlyOnceItsReceiverHasReadIt) {
  SendCompletesWithoutTheReceiver(ShortTimeout(), /*expected=*/false);
}

TEST(ShmSingleCopy, WithSingleCopyOffTheSameSendIsDoneWhenWrittenToTheRing) {
  SendCompletesWithoutTheReceiver(ShortTimeout("0"), /*expected=*/true);
}

// Sizes around the threshold and large odd ones, exchanged with
// run_sendrecv; the receive buffer's guard byte must survive.
TEST(ShmSingleCopy, SendRecvOfEverySizeAroundTheThresholdArrivesIntact) {
  OnRanksAfterBarrier(2, "sizes", ShortTimeout(), [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const int peer = 1 - rank;
    const uint64_t sizes[] = {kByReference - 1, kByReference, kByReference + 1, (3 << 20) + 7, 1,
                              (1 << 20) - 3};
    for (int round = 0; round < 12; ++round) {
      const uint64_t bytes = sizes[round % 6];
      std::vector<uint8_t> out = Pattern(rank, round, bytes), in(bytes + 1, 0xEE);
      dist_op_args_t send = SendArgs(out.data(), bytes, DIST_UINT8, peer, round);
      dist_op_args_t recv = RecvArgs(in.data(), bytes, DIST_UINT8, peer, round);
      RANK_OK(rank, p->run_sendrecv(comm, &send, &recv, 4000));
      RANK_CHECK(rank, Intact(in, peer, round, bytes));
    }
  });
}

// Each rank sends `bytes` to the next with a blocking call, then receives
// from the one before: nobody's recv is posted before its own send is done,
// and each send waits for its receiver to read it. Five rounds, each well
// inside the 4 s timeout.
void SendThenReceiveAroundARing(int world, const std::string& name, uint64_t bytes) {
  OnRanksAfterBarrier(
      world, name, ShortTimeout(), [world, bytes](int rank, dist_backend_comm_t* comm) {
        const dist_backend_plugin_t* p = Plugin();
        const int next = (rank + 1) % world, previous = (rank + world - 1) % world;
        for (int round = 0; round < 5; ++round) {
          const absl::Time start = absl::Now();
          std::vector<uint8_t> out = Pattern(rank, round, bytes), in(bytes + 1, 0xEE);
          RANK_OK(rank, RunOp(p->send, comm, SendArgs(out.data(), bytes, DIST_UINT8, next, round)));
          RANK_OK(rank,
                  RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, previous, round)));
          RANK_CHECK(rank, Intact(in, previous, round, bytes));
          RANK_CHECK(rank, absl::Now() - start < absl::Seconds(2));
        }
      });
}

// Two ranks: each engine must take the peer's message (into a buffer) at
// once instead of holding it for a recv that comes only after the send its
// rank is blocked in.
TEST(ShmSingleCopy, BothRanksSendingFirstDoNotWaitForEachOther) {
  SendThenReceiveAroundARing(2, "send_first", 2 << 20);
}

// Three ranks (0 -> 1 -> 2 -> 0): a message held for its recv must be taken
// after a while, not at the timeout.
TEST(ShmSingleCopy, ACycleOfBlockingSendsCompletes) {
  SendThenReceiveAroundARing(3, "cycle", 1 << 20);
}

// A large message whose recv is posted after a later, small one's: it is
// read into a buffer to get to the small one, and delivered from there.
TEST(ShmSingleCopy, AMessageAheadOfTheOneReceivedIsBufferedAndDelivered) {
  OnRanksAfterBarrier(2, "out_of_order", ShortTimeout(), [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const uint64_t bytes = (1 << 20) + 5;
    for (int round = 0; round < 3; ++round) {
      if (rank == 0) {
        std::vector<uint8_t> out = Pattern(0, round, bytes);
        int32_t small = 100 + round;
        dist_backend_work_t* work = IssueSend(rank, comm, out.data(), bytes, 1, 1);
        RANK_OK(rank, RunOp(p->send, comm, SendArgs(&small, 1, DIST_INT32, 1, 2)));
        RANK_OK(rank, p->work_wait(work, 4000));
        p->work_destroy(work);
      } else {
        int32_t small = 0;
        std::vector<uint8_t> in(bytes + 1, 0xEE);
        RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(&small, 1, DIST_INT32, 0, 2)));
        RANK_CHECK(rank, small == 100 + round);
        RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, 0, 1)));
        RANK_CHECK(rank, Intact(in, 0, round, bytes));
      }
    }
  });
}

// A recv of the wrong size for a message by reference fails naming both
// sizes; the sender's send still completes, and the next message arrives.
TEST(ShmSingleCopy, ARecvOfTheWrongSizeFailsAndTheNextMessageArrives) {
  OnRanksAfterBarrier(2, "mismatch", ShortTimeout(), [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const uint64_t bytes = 1 << 20;
    if (rank == 0) {
      std::vector<uint8_t> out = Pattern(0, 0, bytes);
      RANK_OK(rank, RunOp(p->send, comm, SendArgs(out.data(), bytes, DIST_UINT8, 1, 1)));
      out = Pattern(0, 1, bytes);
      RANK_OK(rank, RunOp(p->send, comm, SendArgs(out.data(), bytes, DIST_UINT8, 1, 2)));
    } else {
      std::vector<uint8_t> in(bytes + 1, 0xEE);
      dist_error_t* error = RunOp(p->recv, comm, RecvArgs(in.data(), bytes - 1, DIST_UINT8, 0, 1));
      RANK_CHECK(rank, error != nullptr);
      const std::string message = dist_error_message(error);
      dist_error_destroy(error);
      RANK_CHECK(rank, message.find("expected 1048575 bytes") != std::string::npos);
      RANK_CHECK(rank, message.find("carried 1048576 bytes") != std::string::npos);
      RANK_CHECK(rank, in[0] == 0xEE);  // nothing written
      RANK_OK(rank, RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, 0, 2)));
      RANK_CHECK(rank, Intact(in, 0, 1, bytes));
    }
  });
}

// A sender that unmaps its buffer before its send is done (a bug in the
// caller) loses that message: no crash; the recv fails saying why, and
// the sender's next operation fails naming the receiver and the reason.
TEST(ShmSingleCopy, ASenderBufferGoneBeforeItIsReadFailsThatRecvOnly) {
  OnRanksAfterBarrier(2, "unmapped", ShortTimeout(), [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const uint64_t bytes = 1 << 20;
    if (rank == 0) {
      void* mapped =
          mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      RANK_CHECK(rank, mapped != MAP_FAILED);
      std::memset(mapped, 1, bytes);
      dist_backend_work_t* work = IssueSend(rank, comm, mapped, bytes, 1, 1);
      RANK_CHECK(rank, munmap(mapped, bytes) == 0);  // too early: the bug
      RANK_OK(rank, p->work_wait(work, 4000));
      p->work_destroy(work);
      dist_error_t* error = nullptr;
      for (int i = 0; i < 200 && error == nullptr; ++i) {  // until rank 1 has failed
        absl::SleepFor(absl::Milliseconds(10));
        error = RunOp(p->barrier, comm, Args());
      }
      RANK_CHECK(rank, error != nullptr);
      const std::string message = error != nullptr ? dist_error_message(error) : "";
      dist_error_destroy(error);
      RANK_CHECK(rank, message.find("rank 1 failed") != std::string::npos);
      RANK_CHECK(rank, message.find("no longer mapped") != std::string::npos);
    } else {
      absl::SleepFor(absl::Milliseconds(500));  // until the buffer is gone
      std::vector<uint8_t> in(bytes + 1, 0xEE);
      dist_error_t* error = RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, 0, 1));
      RANK_CHECK(rank, error != nullptr && dist_error_code(error) == DIST_DATA_LOSS);
      const std::string message = error != nullptr ? dist_error_message(error) : "";
      dist_error_destroy(error);
      RANK_CHECK(rank, message.find("from rank 0") != std::string::npos);
      RANK_CHECK(rank, message.find("no longer mapped") != std::string::npos);
      RANK_CHECK(rank, in[0] == 0xEE || in[0] == 1);  // nothing but the sender's bytes
    }
  });
}

// A sender that aborts its communicator with a send not yet read may reuse
// the buffer as soon as that send fails: the receiver must not deliver what
// the buffer holds by then, and fails the recv saying the message is lost.
TEST(ShmSingleCopy, AMessageFromASenderThatAbortedIsNotReadFromItsReusedBuffer) {
  OnRanksAfterBarrier(2, "aborted_sender", ShortTimeout(), [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const uint64_t bytes = 1 << 20;
    if (rank == 0) {
      std::vector<uint8_t> out = Pattern(0, 0, bytes);
      dist_backend_work_t* work = IssueSend(rank, comm, out.data(), bytes, 1, 1);
      absl::SleepFor(absl::Milliseconds(50));
      p->comm_abort(comm, "test aborts with a send in flight");
      dist_error_t* error = p->work_wait(work, 4000);
      RANK_CHECK(rank, error != nullptr);
      dist_error_destroy(error);
      p->work_destroy(work);
      std::fill(out.begin(), out.end(), 0x5A);   // the send failed: the buffer is ours again
      absl::SleepFor(absl::Milliseconds(1500));  // while rank 1 receives
    } else {
      absl::SleepFor(absl::Milliseconds(800));  // busy until rank 0 has aborted
      std::vector<uint8_t> in(bytes + 1, 0xEE);
      dist_error_t* error = RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, 0, 1));
      RANK_CHECK(rank, error != nullptr);
      dist_error_destroy(error);
      for (uint64_t i = 0; i < bytes; ++i) RANK_CHECK(rank, in[i] != 0x5A);
    }
  });
}

// A sender that exits (here without a word, as in a crash) with its message
// unread: the recv fails saying the sender exited; nothing is read from
// whatever process may hold its pid by then.
TEST(ShmSingleCopy, AMessageFromASenderThatExitedFailsItsRecv) {
  OnRanksAfterBarrier(2, "exited_sender", ShortTimeout(), [](int rank, dist_backend_comm_t* comm) {
    const dist_backend_plugin_t* p = Plugin();
    const uint64_t bytes = 1 << 20;
    if (rank == 0) {
      std::vector<uint8_t> out = Pattern(0, 0, bytes);
      IssueSend(rank, comm, out.data(), bytes, 1, 1);
      absl::SleepFor(absl::Milliseconds(50));
      std::_Exit(0);
    }
    absl::SleepFor(absl::Milliseconds(600));  // until rank 0 is gone
    std::vector<uint8_t> in(bytes + 1, 0xEE);
    dist_error_t* error = RunOp(p->recv, comm, RecvArgs(in.data(), bytes, DIST_UINT8, 0, 1));
    RANK_CHECK(rank, error != nullptr);
    const std::string message = error != nullptr ? dist_error_message(error) : "";
    dist_error_destroy(error);
    RANK_CHECK(rank, message.find("rank 0") != std::string::npos);
  });
}

// A by-reference send waits for its receiver's ack; a receiver that never
// takes it must not leave the sender waiting beyond its timeout. Rank 1
// either exits (the send fails UNAVAILABLE naming it, long before the 4 s
// timeout) or stays alive and never receives (DEADLINE_EXCEEDED at the
// timeout, saying rank 1 did not receive it).
void ASendNobodyTakes(bool receiver_exits) {
  OnRanksAfterBarrier(
      2, receiver_exits ? "receiver_exits" : "receiver_idle", ShortTimeout(),
      [receiver_exits](int rank, dist_backend_comm_t* comm) {
        const dist_backend_plugin_t* p = Plugin();
        const uint64_t bytes = 1 << 20;
        if (rank == 1) {
          if (receiver_exits) std::_Exit(0);
          absl::SleepFor(absl::Seconds(6));  // alive, never calls in
          return;
        }
        std::vector<uint8_t> out = Pattern(0, 0, bytes);
        const absl::Time start = absl::Now();
        dist_error_t* error = RunOp(p->send, comm, SendArgs(out.data(), bytes, DIST_UINT8, 1, 1));
        const absl::Duration took = absl::Now() - start;
        RANK_CHECK(rank, error != nullptr);
        const dist_error_code_t code = dist_error_code(error);
        const std::string message = dist_error_message(error);
        dist_error_destroy(error);
        std::fprintf(stderr, "rank 0: %s\n", message.c_str());
        RANK_CHECK(rank, message.find("rank 1") != std::string::npos);
        if (receiver_exits) {
          RANK_CHECK(rank, code == DIST_UNAVAILABLE);
          RANK_CHECK(rank, took < absl::Seconds(2));
        } else {
          RANK_CHECK(rank, code == DIST_DEADLINE_EXCEEDED);
          RANK_CHECK(rank, message.find("did not receive it") != std::string::npos);
          RANK_CHECK(rank, took >= absl::Milliseconds(3900) && took < absl::Seconds(6));
        }
      });
}

TEST(ShmSingleCopy, ASendWhoseReceiverExitedFailsNamingIt) { ASendNobodyTakes(true); }

TEST(ShmSingleCopy, ASendNobodyReceivesTimesOutNamingTheReceiver) { ASendNobodyTakes(false); }

}  // namespace
}  // namespace dist_test

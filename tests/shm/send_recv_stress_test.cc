// send/recv under schedules drawn at random: how many messages each way,
// their sizes (empty to larger than the ring, by reference from a small
// threshold), the order each rank issues its sends, recvs and a barrier in,
// the order it waits for them in, blocking dist_sendrecv steps in between,
// and a rank that comes late. Both ranks draw the same schedule from one
// seed, so they agree on what is sent; every byte received is checked
// against what its sender wrote. On real forked ranks, each run bounded.
//
// What it is for: the engine's many paths (the callers' fast paths, the
// worker's, buffered early messages, messages restarting at the ring's
// start, by reference) meet here in orders no hand-written test lists. It
// caught a wait that took more than four operations and completed some it
// never ran (RunSendRecv).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_suite.h"

namespace dist_test {
namespace {

uint8_t PatternByte(int from, int64_t tag, uint64_t i) {
  return static_cast<uint8_t>(from * 131 + tag * 29 + i * 7 + (i >> 9));
}

// A message size: mostly small, some around and past the ring's size, a
// few large enough to go by reference.
uint64_t DrawSize(std::mt19937_64& rng) {
  const uint64_t kind = rng() % 16;
  if (kind < 5) return rng() % 65;             // 0-64 B
  if (kind < 10) return 65 + rng() % 4032;     // to 4 KiB
  if (kind < 14) return 4097 + rng() % 70000;  // past a 4 KiB ring, around a 64 KiB one
  return 200000 + rng() % 200000;              // by reference from 8 KiB or 256 KiB
}

struct Message {
  int from;
  int64_t tag;
  uint64_t bytes;
};

// One operation of a rank's round: a send or recv of messages[index], or
// the round's barrier.
struct Op {
  enum Kind { kSend, kRecv, kBarrier } kind;
  size_t index = 0;
};

void RunSchedule(int rank, dist_backend_comm_t* comm, uint64_t seed, int rounds) {
  const dist_backend_plugin_t* p = Plugin();
  const int peer = 1 - rank;
  std::mt19937_64 rng(seed);  // the same draws on both ranks
  int64_t next_tag = 1;
  for (int round = 0; round < rounds; ++round) {
    // The messages, both ways.
    std::vector<Message> messages;
    for (int from = 0; from < 2; ++from) {
      const int count = static_cast<int>(rng() % 9);  // 0-8 each way: often more than four ops
      for (int i = 0; i < count; ++i) messages.push_back({from, next_tag++, DrawSize(rng)});
    }
    const bool barrier = rng() % 4 == 0;
    const int late = static_cast<int>(rng() % 6);  // 0, 1: that rank starts 3 ms late
    const int sendrecv_steps = static_cast<int>(rng() % 3);
    // Each rank's own orders come from a generator of its own, drawn from
    // the shared one (so both ranks keep drawing in step).
    std::mt19937_64 mine(rng() + static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ull);

    std::vector<std::vector<uint8_t>> out(messages.size()), in(messages.size());
    std::vector<Op> ops;
    for (size_t m = 0; m < messages.size(); ++m) {
      const Message& msg = messages[m];
      if (msg.from == rank) {
        out[m].resize(msg.bytes);
        for (uint64_t i = 0; i < msg.bytes; ++i) out[m][i] = PatternByte(rank, msg.tag, i);
        ops.push_back({Op::kSend, m});
      } else {
        in[m].assign(msg.bytes + 1, 0xEE);
        ops.push_back({Op::kRecv, m});
      }
    }
    if (barrier) ops.push_back({Op::kBarrier, 0});
    std::shuffle(ops.begin(), ops.end(), mine);
    if (late == rank) absl::SleepFor(absl::Milliseconds(3));

    std::vector<dist_backend_work_t*> works;
    for (const Op& op : ops) {
      dist_backend_work_t* work = nullptr;
      if (op.kind == Op::kBarrier) {
        dist_op_args_t args = Args();
        RANK_OK(rank, p->barrier(comm, &args, &work));
      } else if (op.kind == Op::kSend) {
        const Message& msg = messages[op.index];
        dist_op_args_t args = SendArgs(out[op.index].data(), msg.bytes, DIST_UINT8, peer, msg.tag);
        RANK_OK(rank, p->send(comm, &args, &work));
      } else {
        const Message& msg = messages[op.index];
        dist_op_args_t args = RecvArgs(in[op.index].data(), msg.bytes, DIST_UINT8, peer, msg.tag);
        RANK_OK(rank, p->recv(comm, &args, &work));
      }
      works.push_back(work);
    }
    std::shuffle(works.begin(), works.end(), mine);
    for (dist_backend_work_t* work : works) {
      RANK_OK(rank, p->work_wait(work, 20000));
      p->work_destroy(work);
    }
    for (size_t m = 0; m < messages.size(); ++m) {
      const Message& msg = messages[m];
      if (msg.from == rank) continue;
      for (uint64_t i = 0; i < msg.bytes; ++i) {
        if (in[m][i] != PatternByte(peer, msg.tag, i)) {
          std::fprintf(stderr, "rank %d: round %d: byte %llu of tag %lld (%llu bytes) is wrong\n",
                       rank, round, static_cast<unsigned long long>(i),
                       static_cast<long long>(msg.tag), static_cast<unsigned long long>(msg.bytes));
          RANK_CHECK(rank, false);
        }
      }
      RANK_CHECK(rank, in[m][msg.bytes] == 0xEE);  // nothing past the message
    }

    // Blocking steps of a ring shift (dist_sendrecv), one size each way.
    for (int step = 0; step < sendrecv_steps; ++step) {
      const uint64_t bytes = DrawSize(rng);
      const int64_t tag = next_tag;
      next_tag += 2;
      std::vector<uint8_t> send(bytes), recv(bytes + 1, 0xEE);
      for (uint64_t i = 0; i < bytes; ++i) send[i] = PatternByte(rank, tag + rank, i);
      dist_op_args_t s = SendArgs(send.data(), bytes, DIST_UINT8, peer, tag + rank);
      dist_op_args_t r = RecvArgs(recv.data(), bytes, DIST_UINT8, peer, tag + peer);
      RANK_OK(rank, p->run_sendrecv(comm, &s, &r, 20000));
      for (uint64_t i = 0; i < bytes; ++i)
        RANK_CHECK(rank, recv[i] == PatternByte(peer, tag + peer, i));
      RANK_CHECK(rank, recv[bytes] == 0xEE);
    }
  }
}

void RunOnTwoRanks(const std::string& name, const CommOptions& options, uint64_t seed, int rounds) {
  const std::string store = TempDir(name) + "/store";
  auto results = RunRanks(2, absl::Seconds(120), [&](int rank) {
    dist_store_t* s = OpenStore(store, rank, 2);
    dist_backend_comm_t* comm = nullptr;
    RANK_OK(rank, CreateComm(s, rank, 2, options, &comm));
    RunSchedule(rank, comm, seed, rounds);
    Plugin()->comm_destroy(comm);
    s->release(s->ctx);
    return 0;
  });
  ExpectAllOk(results);
}

// The seeds a test runs: its own, then SHM_STRESS_SEEDS more (from
// `first_extra`) when that is set, for a longer hunt by hand:
//   bazel test //tests/shm:send_recv_stress_test --test_env=SHM_STRESS_SEEDS=200
std::vector<uint64_t> Seeds(std::vector<uint64_t> seeds, uint64_t first_extra) {
  const char* more = std::getenv("SHM_STRESS_SEEDS");
  const uint64_t extra = more != nullptr ? std::strtoull(more, nullptr, 10) : 0;
  for (uint64_t i = 0; i < extra; ++i) seeds.push_back(first_extra + i);
  return seeds;
}

CommOptions Options(const char* ring_bytes, const char* single_copy_bytes) {
  CommOptions options;
  options.timeout_ms = 20000;
  options.options = {{"shm.ring_bytes", ring_bytes}, {"shm.single_copy_bytes", single_copy_bytes}};
  return options;
}

// 4 KiB rings: most messages stream through in pieces; by reference from
// 8 KiB where the kernel lets a rank read its peer.
TEST(ShmSendRecvStress, SmallRings) {
  for (uint64_t seed : Seeds({1, 2, 3}, 1000)) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RunOnTwoRanks(absl::StrCat("stress_small_", seed), Options("4096", "8192"), seed, 40);
  }
}

// 64 KiB rings: small messages restart at the ring's start, larger ones
// wrap; nothing by reference.
TEST(ShmSendRecvStress, MidRingsThroughTheRingOnly) {
  for (uint64_t seed : Seeds({4, 5, 6}, 2000)) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RunOnTwoRanks(absl::StrCat("stress_mid_", seed), Options("65536", "0"), seed, 40);
  }
}

// The default rings (1 MiB) and threshold (256 KiB).
TEST(ShmSendRecvStress, DefaultGeometry) {
  for (uint64_t seed : Seeds({7, 8}, 3000)) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RunOnTwoRanks(absl::StrCat("stress_default_", seed), Options("1048576", "262144"), seed, 40);
  }
}

}  // namespace
}  // namespace dist_test

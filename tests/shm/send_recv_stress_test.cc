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
  int to;
  int64_t tag;
  uint64_t bytes;
};

// A collective of the round: every rank issues the round's collectives in
// the same order, among its sends and recvs.
struct Collective {
  enum Kind { kBarrier, kAllReduce, kBroadcast } kind;
  int64_t id;      // what the data depends on
  uint64_t count;  // float32 elements (all_reduce), bytes (broadcast)
  int root;
};

// One operation of a rank's round: a send or recv of messages[index], or
// collectives[index].
struct Op {
  enum Kind { kSend, kRecv, kCollective } kind;
  size_t index = 0;
};

float AllReduceInput(int rank, int64_t id, uint64_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>((i * 7 + id) % 13));
}

void RunSchedule(int rank, int world, dist_backend_comm_t* comm, uint64_t seed, int rounds,
                 bool collectives) {
  const dist_backend_plugin_t* p = Plugin();
  std::mt19937_64 rng(seed);  // the same draws on every rank
  int64_t next_tag = 1;
  for (int round = 0; round < rounds; ++round) {
    // The messages, every way.
    std::vector<Message> messages;
    for (int from = 0; from < world; ++from) {
      for (int to = 0; to < world; ++to) {
        if (from == to) continue;
        // 0-8 between two ranks (often more than four operations), 0-4 per
        // pair among three.
        const int count = static_cast<int>(rng() % (world == 2 ? 9 : 5));
        for (int i = 0; i < count; ++i) messages.push_back({from, to, next_tag++, DrawSize(rng)});
      }
    }
    std::vector<Collective> colls;
    const int coll_count = collectives ? static_cast<int>(rng() % 3) : (rng() % 4 == 0 ? 1 : 0);
    for (int c = 0; c < coll_count; ++c) {
      const auto kind =
          collectives ? static_cast<Collective::Kind>(rng() % 3) : Collective::kBarrier;
      colls.push_back({kind, next_tag++, 1 + DrawSize(rng) / 4, static_cast<int>(rng() % world)});
    }
    const int late =
        static_cast<int>(rng() % (world + 4));  // one rank in world + 4 starts 3 ms late
    const int sendrecv_steps = static_cast<int>(rng() % 3);
    // Each rank's own orders come from a generator of its own, drawn from
    // the shared one (so every rank keeps drawing in step).
    std::mt19937_64 mine(rng() + static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ull);

    std::vector<std::vector<uint8_t>> out(messages.size()), in(messages.size());
    std::vector<Op> ops;
    for (size_t m = 0; m < messages.size(); ++m) {
      const Message& msg = messages[m];
      if (msg.from == rank) {
        out[m].resize(msg.bytes);
        for (uint64_t i = 0; i < msg.bytes; ++i) out[m][i] = PatternByte(rank, msg.tag, i);
        ops.push_back({Op::kSend, m});
      } else if (msg.to == rank) {
        in[m].assign(msg.bytes + 1, 0xEE);
        ops.push_back({Op::kRecv, m});
      }
    }
    std::shuffle(ops.begin(), ops.end(), mine);
    // The collectives go in at places of this rank's choosing, in order.
    std::vector<size_t> places;
    for (size_t c = 0; c < colls.size(); ++c) places.push_back(mine() % (ops.size() + 1));
    std::sort(places.begin(), places.end());
    for (size_t c = colls.size(); c-- > 0;) {
      ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(places[c]), Op{Op::kCollective, c});
    }
    std::vector<std::vector<float>> reduced(colls.size());
    std::vector<std::vector<uint8_t>> broadcast(colls.size());
    if (late == rank) absl::SleepFor(absl::Milliseconds(3));

    std::vector<dist_backend_work_t*> works;
    for (const Op& op : ops) {
      if (op.kind == Op::kCollective) {
        const Collective& c = colls[op.index];
        dist_op_args_t args = Args();
        if (c.kind == Collective::kBarrier) {
          works.push_back(Issue(rank, p->barrier, comm, args));
        } else if (c.kind == Collective::kAllReduce) {
          std::vector<float>& v = reduced[op.index];
          v.resize(c.count);
          for (uint64_t i = 0; i < c.count; ++i) v[i] = AllReduceInput(rank, c.id, i);
          args.send = args.recv = Buffer(v.data(), c.count, DIST_FLOAT32);
          args.op = DIST_SUM;
          works.push_back(Issue(rank, p->all_reduce, comm, args));
        } else {
          std::vector<uint8_t>& v = broadcast[op.index];
          v.assign(c.count, 0xEE);
          if (rank == c.root) {
            for (uint64_t i = 0; i < c.count; ++i) v[i] = PatternByte(c.root, c.id, i);
          }
          args.send = args.recv = Buffer(v.data(), c.count, DIST_UINT8);
          args.root = c.root;
          works.push_back(Issue(rank, p->broadcast, comm, args));
        }
      } else {
        const Message& msg = messages[op.index];
        works.push_back(
            op.kind == Op::kSend
                ? Issue(rank, p->send, comm,
                        SendArgs(out[op.index].data(), msg.bytes, DIST_UINT8, msg.to, msg.tag))
                : Issue(rank, p->recv, comm,
                        RecvArgs(in[op.index].data(), msg.bytes, DIST_UINT8, msg.from, msg.tag)));
      }
    }
    std::shuffle(works.begin(), works.end(), mine);
    WaitAll(rank, works, 20000);
    for (size_t m = 0; m < messages.size(); ++m) {
      const Message& msg = messages[m];
      if (msg.to != rank) continue;
      for (uint64_t i = 0; i < msg.bytes; ++i) {
        if (in[m][i] != PatternByte(msg.from, msg.tag, i)) {
          std::fprintf(stderr, "rank %d: round %d: byte %llu of tag %lld (%llu bytes) is wrong\n",
                       rank, round, static_cast<unsigned long long>(i),
                       static_cast<long long>(msg.tag), static_cast<unsigned long long>(msg.bytes));
          RANK_CHECK(rank, false);
        }
      }
      RANK_CHECK(rank, in[m][msg.bytes] == 0xEE);  // nothing past the message
    }
    for (size_t c = 0; c < colls.size(); ++c) {
      const Collective& coll = colls[c];
      if (coll.kind == Collective::kAllReduce) {
        const int ranks_sum = world * (world + 1) / 2;  // sum of rank + 1
        for (uint64_t i = 0; i < coll.count; ++i) {
          RANK_CHECK(rank, reduced[c][i] == AllReduceInput(0, coll.id, i) * ranks_sum);
        }
      } else if (coll.kind == Collective::kBroadcast) {
        for (uint64_t i = 0; i < coll.count; ++i) {
          RANK_CHECK(rank, broadcast[c][i] == PatternByte(coll.root, coll.id, i));
        }
      }
    }

    // Blocking steps of a ring shift (dist_sendrecv), one size everywhere.
    const int next = (rank + 1) % world;
    const int prev = (rank + world - 1) % world;
    for (int step = 0; step < sendrecv_steps; ++step) {
      const uint64_t bytes = DrawSize(rng);
      const int64_t tag = next_tag;
      next_tag += world;
      std::vector<uint8_t> send(bytes), recv(bytes + 1, 0xEE);
      for (uint64_t i = 0; i < bytes; ++i) send[i] = PatternByte(rank, tag + rank, i);
      dist_op_args_t s = SendArgs(send.data(), bytes, DIST_UINT8, next, tag + rank);
      dist_op_args_t r = RecvArgs(recv.data(), bytes, DIST_UINT8, prev, tag + prev);
      RANK_OK(rank, p->run_sendrecv(comm, &s, &r, 20000));
      for (uint64_t i = 0; i < bytes; ++i) {
        RANK_CHECK(rank, recv[i] == PatternByte(prev, tag + prev, i));
      }
      RANK_CHECK(rank, recv[bytes] == 0xEE);
    }
  }
}

// RunSchedule on `world` ranks (OnRanks, shm_suite.h).
void RunStress(int world, const std::string& name, const CommOptions& options, uint64_t seed,
               int rounds, bool collectives) {
  OnRanks(
      world, name, options,
      [&](int rank, dist_backend_comm_t* comm) {
        RunSchedule(rank, world, comm, seed, rounds, collectives);
      },
      absl::Seconds(120));
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
    RunStress(2, absl::StrCat("stress_small_", seed), Options("4096", "8192"), seed, 40, false);
  }
}

// 64 KiB rings: small messages restart at the ring's start, larger ones
// wrap; nothing by reference.
TEST(ShmSendRecvStress, MidRingsThroughTheRingOnly) {
  for (uint64_t seed : Seeds({4, 5, 6}, 2000)) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RunStress(2, absl::StrCat("stress_mid_", seed), Options("65536", "0"), seed, 40, false);
  }
}

// The default rings (1 MiB) and threshold (256 KiB).
TEST(ShmSendRecvStress, DefaultGeometry) {
  for (uint64_t seed : Seeds({7, 8}, 3000)) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    RunStress(2, absl::StrCat("stress_default_", seed), Options("1048576", "262144"), seed, 40,
              false);
  }
}

// Three ranks, messages between every pair, and all_reduces, broadcasts
// from any root and barriers issued among them (the engine moves send/recv
// while the worker waits inside the collectives); 4 KiB slots and rings,
// so the collectives stream in chunks too.
TEST(ShmSendRecvStress, ThreeRanksWithCollectives) {
  for (uint64_t seed : Seeds({9, 10}, 4000)) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    CommOptions options = Options("4096", "8192");
    options.options.push_back({"shm.slot_bytes", "4096"});
    RunStress(3, absl::StrCat("stress_three_", seed), options, seed, 30, true);
  }
}

}  // namespace
}  // namespace dist_test

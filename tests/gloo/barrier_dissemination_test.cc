// dist's dissemination barrier (plugins/backends/gloo/barrier_dissemination.h)
// over real Gloo synchronous pairs on loopback, one thread a rank: no rank
// leaves barrier i before every rank has reached it, run after run, at
// world sizes that are and are not powers of two.
#include "plugins/backends/gloo/barrier_dissemination.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"

namespace dist_gloo {
namespace {

constexpr int kRuns = 40;

void CheckWorld(int world) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::HashStore store;
  // arrived[i]: how many ranks have reached barrier i.
  std::vector<std::atomic<int>> arrived(kRuns);
  std::atomic<int> early_leaves{0};
  auto rank_main = [&](int rank) {
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world);
    context->setTimeout(std::chrono::seconds(30));
    context->connectFullMesh(store, device);
    for (int peer = 0; peer < world; ++peer) {
      if (peer != rank) context->getPair(peer)->setSync(true, /*busyPoll=*/false);
    }
    BarrierDissemination barrier(context);
    std::mt19937 random(static_cast<unsigned>(rank * 7919 + world));
    for (int i = 0; i < kRuns; ++i) {
      // Some ranks arrive late, in a different order each run.
      if (random() % 3 == 0) absl::SleepFor(absl::Microseconds(random() % 2000));
      arrived[i].fetch_add(1);
      barrier.run();
      if (arrived[i].load() != world) early_leaves.fetch_add(1);
    }
  };
  std::vector<std::thread> others;
  for (int rank = 1; rank < world; ++rank) others.emplace_back(rank_main, rank);
  rank_main(0);
  for (std::thread& t : others) t.join();
  EXPECT_EQ(early_leaves.load(), 0) << "world size " << world;
  for (int i = 0; i < kRuns; ++i) EXPECT_EQ(arrived[i].load(), world) << "barrier " << i;
}

TEST(BarrierDissemination, HoldsEveryRankOnTwoRanks) { CheckWorld(2); }
TEST(BarrierDissemination, HoldsEveryRankOnThreeRanks) { CheckWorld(3); }
TEST(BarrierDissemination, HoldsEveryRankOnFiveRanks) { CheckWorld(5); }
TEST(BarrierDissemination, HoldsEveryRankOnEightRanks) { CheckWorld(8); }

TEST(BarrierDissemination, OneRankReturnsAtOnce) {
  auto context = std::make_shared<gloo::rendezvous::Context>(0, 1);
  BarrierDissemination barrier(context);
  barrier.run();
}

}  // namespace
}  // namespace dist_gloo

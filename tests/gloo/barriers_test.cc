// dist's barriers for the synchronous pairs (plugins/backends/gloo/
// barrier_{dissemination,all_to_all,all_to_one}.h) over real Gloo
// synchronous pairs on loopback, one thread a rank: no rank leaves barrier i
// before every rank has reached it, run after run, at world sizes that are
// and are not powers of two.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"
#include "plugins/backends/gloo/barrier_all_to_all.h"
#include "plugins/backends/gloo/barrier_all_to_one.h"
#include "plugins/backends/gloo/barrier_dissemination.h"

namespace dist_gloo {
namespace {

constexpr int kRuns = 40;

using MakeBarrier =
    std::function<std::unique_ptr<gloo::Algorithm>(const std::shared_ptr<gloo::Context>& context)>;

struct Kind {
  const char* name;
  MakeBarrier make;
};

const Kind kKinds[] = {
    {"Dissemination",
     [](const auto& context) { return std::make_unique<BarrierDissemination>(context); }},
    {"AllToAll", [](const auto& context) { return std::make_unique<BarrierAllToAll>(context); }},
    {"AllToOneRootFirst",
     [](const auto& context) { return std::make_unique<BarrierAllToOne>(context, 0); }},
    {"AllToOneRootLast",
     [](const auto& context) {
       return std::make_unique<BarrierAllToOne>(context, context->size - 1);
     }},
};

void CheckWorld(const Kind& kind, int world) {
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
    std::unique_ptr<gloo::Algorithm> barrier = kind.make(context);
    std::mt19937 random(static_cast<unsigned>(rank * 7919 + world));
    for (int i = 0; i < kRuns; ++i) {
      // Some ranks arrive late, in a different order each run.
      if (random() % 3 == 0) absl::SleepFor(absl::Microseconds(random() % 2000));
      arrived[i].fetch_add(1);
      barrier->run();
      if (arrived[i].load() != world) early_leaves.fetch_add(1);
    }
  };
  std::vector<std::thread> others;
  for (int rank = 1; rank < world; ++rank) others.emplace_back(rank_main, rank);
  rank_main(0);
  for (std::thread& t : others) t.join();
  EXPECT_EQ(early_leaves.load(), 0) << kind.name << ", world size " << world;
  for (int i = 0; i < kRuns; ++i) EXPECT_EQ(arrived[i].load(), world) << "barrier " << i;
}

class Barriers : public testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Barriers, HoldEveryRank) {
  CheckWorld(kKinds[std::get<0>(GetParam())], std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(KindsAndWorlds, Barriers,
                         testing::Combine(testing::Range(0, static_cast<int>(std::size(kKinds))),
                                          testing::Values(2, 3, 5, 8)),
                         [](const testing::TestParamInfo<std::tuple<int, int>>& info) {
                           return std::string(kKinds[std::get<0>(info.param)].name) + "On" +
                                  std::to_string(std::get<1>(info.param)) + "Ranks";
                         });

// Gloo's nextSlot(0) throws, so a class must take no slot on one rank.
TEST(Barriers, OneRankReturnsAtOnce) {
  auto context = std::make_shared<gloo::rendezvous::Context>(0, 1);
  for (const Kind& kind : kKinds) kind.make(context)->run();
}

}  // namespace
}  // namespace dist_gloo

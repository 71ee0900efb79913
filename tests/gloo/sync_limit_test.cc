// The limit on what Gloo's synchronous pairs carry (sync_limit.h): the rule
// from a send buffer's size, and the agreement between ranks that allow
// different limits, over real Gloo pairs on loopback (two ranks, one thread
// each).
#include "plugins/backends/gloo/sync_limit.h"

#include <chrono>
#include <memory>
#include <thread>

#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"

namespace dist_gloo {
namespace {

TEST(SyncMessageLimit, QuarterOfTheBufferAsAPowerOfTwo) {
  // A default Linux: wmem_max 212992, so a 4 MiB request gets 2 x that.
  EXPECT_EQ(SyncMessageLimit(2 * 212992), size_t{64} << 10);
  // wmem_max of 4 MiB (this VM): a quarter of 8 MiB is 2 MiB; the cap wins.
  EXPECT_EQ(SyncMessageLimit(int64_t{8} << 20), kMaxSyncMessageBytes);
  EXPECT_EQ(SyncMessageLimit(int64_t{4} << 20), size_t{1} << 20);
  EXPECT_EQ(SyncMessageLimit((int64_t{4} << 20) - 1), size_t{512} << 10);
  EXPECT_EQ(SyncMessageLimit(4), size_t{1});
  // Unknown or absurdly small: nothing but empty messages (barriers).
  EXPECT_EQ(SyncMessageLimit(3), size_t{0});
  EXPECT_EQ(SyncMessageLimit(0), size_t{0});
  EXPECT_EQ(SyncMessageLimit(-1), size_t{0});
}

// Each rank allows a different limit; both end with the smaller one.
TEST(AgreeSyncMessageLimit, RanksUseTheSmallestAnyAllows) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::HashStore store;
  const size_t allows[2] = {size_t{8} << 10, kMaxSyncMessageBytes};
  size_t agreed[2] = {0, 0};
  auto rank_main = [&](int rank) {
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
    context->setTimeout(std::chrono::seconds(10));
    context->connectFullMesh(store, device);
    context->getPair(1 - rank)->setSync(true, /*busyPoll=*/false);
    agreed[rank] = AgreeSyncMessageLimit(context, 4 << 20, allows[rank]);
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  EXPECT_EQ(agreed[0], allows[0]);
  EXPECT_EQ(agreed[1], allows[0]);
}

}  // namespace
}  // namespace dist_gloo

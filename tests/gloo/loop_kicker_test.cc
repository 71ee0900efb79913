// LoopKicker with a real Gloo TCP device: its timer must never be watched
// by a device thread after the kicker is gone (that thread would call a
// freed handler), whether the kicker is the device's last owner or not,
// and kicking must leave Gloo's pairs working.
#include "plugins/backends/gloo/loop_kicker.h"

#include <dirent.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gloo/allreduce_ring.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"

namespace dist_gloo {
namespace {

std::shared_ptr<gloo::transport::Device> LoopbackDevice() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
}

int ThreadCount() {
  int count = 0;
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return -1;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(tasks);
  return count;
}

// The device's thread (one per Gloo TCP device) is gone once its last
// owner, the kicker, is: so the timer it watched went with it.
TEST(LoopKicker, TheLastOwnerStopsTheDeviceThread) {
  std::shared_ptr<LoopKicker> kicker = LoopKicker::Create(LoopbackDevice());
  // Counted from here: a sanitizer may start a thread of its own before.
  const int with_device = ThreadCount();
  ASSERT_GT(with_device, 1);
  {
    LoopKicker::Kick kick(kicker.get());
    LoopKicker::Kick nested(kicker.get());
  }
  kicker.reset();
  EXPECT_EQ(ThreadCount(), with_device - 1);
}

// Two ranks connect and all-reduce over the kicker's device while it is
// kicked, then the kicker goes first while Gloo's contexts still hold the
// device: it must take its timer out of the device thread's set (the
// thread keeps running for the contexts), and everything closes cleanly.
TEST(LoopKicker, KickedPairsWorkAndAKickerThatIsNotTheLastOwnerLeavesNoTimer) {
  std::shared_ptr<LoopKicker> kicker = LoopKicker::Create(LoopbackDevice());
  gloo::rendezvous::HashStore store;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts(2);
  std::vector<float> results(2);
  auto rank_main = [&](int rank) {
    LoopKicker::Kick kick(kicker.get());
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
    context->setTimeout(std::chrono::seconds(20));
    std::shared_ptr<gloo::transport::Device> device = kicker->device();
    context->connectFullMesh(store, device);
    std::vector<float> data = {static_cast<float>(rank + 1)};
    std::vector<float*> pointers = {data.data()};
    gloo::AllreduceRing<float>(context, pointers, 1).run();
    results[rank] = data[0];
    contexts[rank] = context;
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();
  EXPECT_EQ(results[0], 3.0f);
  EXPECT_EQ(results[1], 3.0f);
  const int with_device = ThreadCount();
  kicker.reset();  // the contexts still hold the device
  EXPECT_EQ(ThreadCount(), with_device);
  contexts.clear();  // the device, and its thread, go with the last context
  EXPECT_EQ(ThreadCount(), with_device - 1);
}

}  // namespace
}  // namespace dist_gloo

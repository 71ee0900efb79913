// ConnectFullMesh with real Gloo TCP pairs on loopback, ranks as threads of
// one process meeting through an in-memory store: every pair connects and
// carries data, and a peer that vanishes after publishing its addresses
// fails every rank within the timeout instead of hanging one.
#include "plugins/backends/gloo/full_mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"
#include "gloo/alltoall.h"
#include "gloo/context.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "support/memory_store.h"

namespace dist_gloo {
namespace {

using ::testing::HasSubstr;

constexpr char kPrefix[] = "mesh/";

MeshOptions Options() {
  MeshOptions options;
  options.key_prefix = kPrefix;
  return options;
}

std::shared_ptr<gloo::transport::Device> LoopbackDevice() {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  return gloo::transport::tcp::CreateDevice(attr);
}

struct StoreHolder {
  dist_store_t* table = dist::NewMemoryStore();
  ~StoreHolder() { table->release(table->ctx); }
  dist::StoreView view() const { return dist::StoreView(table); }
};

// Ranks 0..count-1 of a world of `world` connect at once, each on a thread
// of its own; each one's status and how long it took.
struct Outcome {
  absl::Status status;
  absl::Duration took;
};
std::vector<Outcome> ConnectRanks(int count, int world, const dist::StoreView& store,
                                  absl::Duration timeout) {
  std::vector<Outcome> outcomes(count);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < count; ++rank) {
    ranks.emplace_back([&, rank] {
      auto context = std::make_shared<gloo::Context>(rank, world);
      context->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
      const absl::Time start = absl::Now();
      outcomes[rank].status =
          ConnectFullMesh(*context, store, LoopbackDevice(), timeout, Options());
      outcomes[rank].took = absl::Now() - start;
    });
  }
  for (std::thread& thread : ranks) thread.join();
  return outcomes;
}

// Twelve ranks: each rank makes the connections of the pairs where Gloo
// puts it on the connecting side and waits for the others, so a wrong side
// (or a connect that waits on a peer's wait) would stall ranks into the
// timeout. Then an all-to-all, which uses every pair, checks that each
// pair reaches the right peer.
TEST(ConnectFullMesh, EveryPairConnectsAndCarriesData) {
  constexpr int kRanks = 12;
  StoreHolder store;
  std::vector<absl::Status> connected(kRanks);
  std::vector<std::vector<int64_t>> received(kRanks);
  auto rank_main = [&](int rank) {
    auto context = std::make_shared<gloo::Context>(rank, kRanks);
    context->setTimeout(std::chrono::seconds(30));
    connected[rank] =
        ConnectFullMesh(*context, store.view(), LoopbackDevice(), absl::Seconds(30), Options());
    if (!connected[rank].ok()) return;
    // Rank r sends r * 1000 + p to rank p.
    std::vector<int64_t> send(kRanks);
    for (int peer = 0; peer < kRanks; ++peer) send[peer] = rank * 1000 + peer;
    received[rank].assign(kRanks, -1);
    gloo::AlltoallOptions options(context);
    options.setInput(send.data(), send.size());
    options.setOutput(received[rank].data(), received[rank].size());
    gloo::alltoall(options);
  };
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < kRanks; ++rank) ranks.emplace_back(rank_main, rank);
  for (std::thread& thread : ranks) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_TRUE(connected[rank].ok()) << "rank " << rank << ": " << connected[rank];
    for (int peer = 0; peer < kRanks; ++peer) {
      EXPECT_EQ(received[rank][peer], peer * 1000 + rank) << "rank " << rank << " from " << peer;
    }
  }
}

// An intruder that connects to rank 0's Gloo port in rank 1's place and
// speaks Gloo's protocol, but does not know the secret rank 0 put in the
// job's store: rank 0 refuses the connection, naming rank 1. The intruder
// listens on 127.0.0.2, above rank 0's 127.0.0.1, so that Gloo makes its
// end the one that connects and rank 0's the one that accepts, as when a
// stranger reaches a rank's listening port first. (It reads the job's keys
// from a copy, with a made-up secret, and its address is put where rank 1's
// would be; the real rank 1 never starts.)
TEST(ConnectFullMesh, AnIntruderWithoutTheJobsSecretIsRefused) {
  constexpr int kRanks = 2;
  const absl::Duration timeout = absl::Seconds(10);
  StoreHolder job;     // rank 0's store
  StoreHolder forged;  // the intruder's: rank 0's addresses, a made-up secret
  ASSERT_TRUE(forged.view().Set(absl::StrCat(kPrefix, "pair_secret"), std::string(32, 'x')).ok());
  std::thread relay([&] {
    absl::StatusOr<std::string> address = job.view().Get(absl::StrCat(kPrefix, 0), timeout);
    if (address.ok()) (void)forged.view().Set(absl::StrCat(kPrefix, 0), *address);
    address = forged.view().Get(absl::StrCat(kPrefix, 1), timeout);
    if (address.ok()) (void)job.view().Set(absl::StrCat(kPrefix, 1), *address);
  });
  absl::Status rank0;
  absl::Status intruder;
  std::thread rank0_thread([&] {
    auto context = std::make_shared<gloo::Context>(0, kRanks);
    context->setTimeout(std::chrono::seconds(10));
    rank0 = ConnectFullMesh(*context, job.view(), LoopbackDevice(), timeout, Options());
  });
  std::thread intruder_thread([&] {
    auto context = std::make_shared<gloo::Context>(1, kRanks);
    context->setTimeout(std::chrono::seconds(10));
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.2";
    intruder = ConnectFullMesh(*context, forged.view(), gloo::transport::tcp::CreateDevice(attr),
                               timeout, Options());
  });
  rank0_thread.join();
  intruder_thread.join();
  relay.join();
  EXPECT_TRUE(intruder.ok()) << "the intruder connected and sent its proof: " << intruder;
  EXPECT_EQ(rank0.code(), absl::StatusCode::kPermissionDenied) << rank0;
  EXPECT_THAT(std::string(rank0.message()),
              HasSubstr("rank 0 got a wrong proof of membership over its Gloo connection from "
                        "rank 1: "));
}

// A program that connects to rank 0's Gloo port in rank 1's place and says
// nothing: rank 0 gives up on it at the timeout, naming rank 1, instead of
// taking the silent connection for rank 1. Rank 1's published end listens
// on 127.0.0.2, so that rank 0's end is the one that accepts.
TEST(ConnectFullMesh, ASilentIntruderIsNamedAtTheTimeout) {
  constexpr int kRanks = 2;
  const absl::Duration timeout = absl::Seconds(2);
  StoreHolder store;
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.2";
  auto absent_device = gloo::transport::tcp::CreateDevice(attr);
  auto absent = absent_device->createContext(1, kRanks);
  const std::vector<char> absent_address = absent->createPair(0)->address().bytes();
  ASSERT_TRUE(
      store.view()
          .Set(absl::StrCat(kPrefix, 1), std::string(absent_address.begin(), absent_address.end()))
          .ok());
  absl::Status rank0;
  absl::Duration took;
  std::thread rank0_thread([&] {
    auto context = std::make_shared<gloo::Context>(0, kRanks);
    context->setTimeout(std::chrono::seconds(2));
    const absl::Time start = absl::Now();
    rank0 = ConnectFullMesh(*context, store.view(), LoopbackDevice(), timeout, Options());
    took = absl::Now() - start;
  });
  // The intruder: a plain TCP connection to rank 0's end, silent.
  // (No ASSERT before the join: returning with rank 0's thread running
  // would end the whole test binary.)
  absl::StatusOr<std::string> published = store.view().Get(absl::StrCat(kPrefix, 0), timeout);
  int intruder = -1;
  if (published.ok()) {
    const gloo::transport::tcp::Address rank0_end(
        std::vector<char>(published->begin(), published->end()));
    const sockaddr_storage& address = rank0_end.getSockaddr();
    intruder = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(intruder, 0) << strerror(errno);
    if (intruder >= 0) {
      EXPECT_EQ(connect(intruder, reinterpret_cast<const sockaddr*>(&address), sizeof(sockaddr_in)),
                0);
    }
  }
  rank0_thread.join();
  if (intruder >= 0) close(intruder);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(rank0.code(), absl::StatusCode::kDeadlineExceeded) << rank0;
  EXPECT_THAT(std::string(rank0.message()),
              HasSubstr("rank 0 got no proof of membership over its Gloo connection from rank 1"));
  EXPECT_LT(took, timeout + absl::Seconds(3)) << rank0;
}

// Rank 3 publishes the addresses of its pairs and then closes them, as a
// process that dies right after publishing would. Every other rank must
// fail within the timeout, and rank 3 must be named.
TEST(ConnectFullMesh, APeerGoneAfterPublishingFailsEveryRankInTime) {
  constexpr int kRanks = 4;
  constexpr int kGone = 3;
  const absl::Duration timeout = absl::Seconds(2);
  StoreHolder store;
  {
    auto device = LoopbackDevice();
    auto transport = device->createContext(kGone, kRanks);
    std::string addresses;
    for (int peer = 0; peer < kGone; ++peer) {
      const std::vector<char> bytes = transport->createPair(peer)->address().bytes();
      addresses.append(bytes.begin(), bytes.end());
    }
    ASSERT_TRUE(store.view().Set(absl::StrCat(kPrefix, kGone), addresses).ok());
  }  // the listening sockets close here
  const std::vector<Outcome> connected = ConnectRanks(kGone, kRanks, store.view(), timeout);
  bool named = false;
  for (int rank = 0; rank < kGone; ++rank) {
    const absl::Status& status = connected[rank].status;
    ASSERT_FALSE(status.ok()) << "rank " << rank;
    EXPECT_THAT(std::string(status.message()), HasSubstr("connect")) << "rank " << rank;
    named |= absl::StrContains(status.message(), "rank 3") ||
             absl::StrContains(status.message(), "rank(s) 3");
    // The timeout, once, plus scheduling: not Gloo's five times the pair's
    // timeout for a connect, nor one timeout per pair.
    EXPECT_LT(connected[rank].took, timeout + absl::Seconds(2))
        << "rank " << rank << ": " << status;
  }
  EXPECT_TRUE(named) << connected[0].status << "\n"
                     << connected[1].status << "\n"
                     << connected[2].status;
}

// Rank 3 cannot open its sockets (its process is at its open-files limit):
// it fails naming the limit and the fix, and ranks 0-2 fail at once naming
// rank 3, not at their timeout waiting for its addresses.
TEST(ConnectFullMesh, ARankOutOfFileDescriptorsFailsEveryRankAtOnce) {
  constexpr int kRanks = 4;
  constexpr int kStuck = 3;
  const absl::Duration timeout = absl::Seconds(20);
  StoreHolder store;
  {
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int open_files = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      static_cast<void>(entry);
      ++open_files;
    }
    rlimit low = saved;
    low.rlim_cur = static_cast<rlim_t>(open_files + 1);  // one socket, not three
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    auto device = LoopbackDevice();
    auto context = std::make_shared<gloo::Context>(kStuck, kRanks);
    const absl::Status stuck = ConnectFullMesh(*context, store.view(), device, timeout, Options());
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
    EXPECT_TRUE(absl::IsResourceExhausted(stuck)) << stuck;
    EXPECT_THAT(std::string(stuck.message()), HasSubstr("Too many open files"));
    EXPECT_THAT(std::string(stuck.message()), HasSubstr("ulimit -n"));
  }
  const std::vector<Outcome> connected = ConnectRanks(kStuck, kRanks, store.view(), timeout);
  for (int rank = 0; rank < kStuck; ++rank) {
    const absl::Status& status = connected[rank].status;
    EXPECT_TRUE(absl::IsFailedPrecondition(status)) << "rank " << rank << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr("rank 3 could not open its Gloo sockets"));
    EXPECT_LT(connected[rank].took, absl::Seconds(5)) << "rank " << rank;
  }
}

// Rank 1 "publishes" an address at 127.0.0.2, larger than rank 0's at
// 127.0.0.1, so Gloo puts rank 0 on the accepting end; rank 1 never
// connects (nothing is sent to 127.0.0.2). Rank 0 is left waiting for a
// peer's connect, the one wait that is Gloo's own.
class SilentPeer {
 public:
  explicit SilentPeer(const dist::StoreView& store) {
    // A real rank's address, with the host part moved to 127.0.0.2.
    auto device = LoopbackDevice();
    auto transport = device->createContext(1, 2);
    const gloo::transport::tcp::Address real(transport->createPair(0)->address().bytes());
    sockaddr_in address;
    std::memcpy(&address, &real.getSockaddr(), sizeof(address));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
    const std::vector<char> bytes =
        gloo::transport::tcp::Address(reinterpret_cast<const sockaddr*>(&address), sizeof(address))
            .bytes();
    published_ = store.Set(absl::StrCat(kPrefix, 1), std::string(bytes.begin(), bytes.end()));
  }
  const absl::Status& published() const { return published_; }

 private:
  absl::Status published_;
};

absl::Status ConnectRankZeroOfTwo(const dist::StoreView& store, absl::Duration timeout,
                                  MeshOptions options, absl::Duration* took) {
  auto context = std::make_shared<gloo::Context>(0, 2);
  context->setTimeout(std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  const absl::Time start = absl::Now();
  absl::Status status = ConnectFullMesh(*context, store, LoopbackDevice(), timeout, options);
  *took = absl::Now() - start;
  return status;
}

// The wait for a peer's connect ends at the mesh's timeout, naming the
// peer (Gloo's own wait would be five times the pair's timeout: 5 s).
TEST(ConnectFullMesh, APeerThatNeverConnectsIsNamedAtTheTimeout) {
  StoreHolder store;
  SilentPeer silent(store.view());
  ASSERT_TRUE(silent.published().ok()) << silent.published();
  absl::Duration took;
  const absl::Status status =
      ConnectRankZeroOfTwo(store.view(), absl::Seconds(1), Options(), &took);
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("connecting to rank(s) 1"));
  EXPECT_LT(took, absl::Seconds(3)) << status;
}

// An abort (the cancelled callback) ends that wait within a poll, not at
// the timeout.
TEST(ConnectFullMesh, ACancelledWaitForAPeersConnectEndsAtOnce) {
  StoreHolder store;
  SilentPeer silent(store.view());
  ASSERT_TRUE(silent.published().ok()) << silent.published();
  MeshOptions options = Options();
  const absl::Time cancel_at = absl::Now() + absl::Milliseconds(200);
  options.cancelled = [cancel_at] { return absl::Now() >= cancel_at; };
  absl::Duration took;
  const absl::Status status = ConnectRankZeroOfTwo(store.view(), absl::Seconds(20), options, &took);
  EXPECT_TRUE(absl::IsAborted(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("cancelled while connecting to rank(s) 1"));
  EXPECT_LT(took, absl::Seconds(10)) << status;
}

}  // namespace
}  // namespace dist_gloo

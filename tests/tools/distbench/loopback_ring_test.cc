// The loopback ring under --ceiling (tools/distbench/loopback_ring.h), on
// real sockets with one thread per rank: every byte arrives in order at
// the right neighbour, and a neighbour that is silent, gone or a stranger
// gives an error naming it within the timeout instead of a hang.
#include "tools/distbench/loopback_ring.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace distbench {
namespace {

using Rings = std::vector<std::unique_ptr<LoopbackRing>>;

// Runs `fn(rank)` on a thread per rank and waits for all.
void OnEveryRank(int world_size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

Rings ConnectRing(int world_size, absl::Duration timeout = absl::Seconds(10)) {
  std::vector<std::unique_ptr<LoopbackListener>> listeners;
  std::vector<int> ports;
  for (int r = 0; r < world_size; ++r) {
    absl::StatusOr<std::unique_ptr<LoopbackListener>> listener = LoopbackListener::Open();
    EXPECT_TRUE(listener.ok()) << listener.status();
    if (!listener.ok()) return {};
    ports.push_back((*listener)->port());
    listeners.push_back(*std::move(listener));
  }
  Rings rings(world_size);
  OnEveryRank(world_size, [&](int r) {
    absl::StatusOr<std::unique_ptr<LoopbackRing>> ring =
        LoopbackRing::Connect(r, world_size, ports, *listeners[r], 1 << 20, timeout);
    EXPECT_TRUE(ring.ok()) << "rank " << r << ": " << ring.status();
    if (ring.ok()) rings[r] = *std::move(ring);
  });
  return rings;
}

// Byte k of rank r's stream.
char StreamByte(int r, uint64_t k) { return static_cast<char>((k * 7 + r * 13 + k / 251) & 0xff); }

// Every rank sends `bytes` from a buffer of `send_len` (so the stream
// wraps around it) and receives into one of `recv_len`; checks that what
// arrived last in each place is the left neighbour's stream.
void ShiftAndCheck(Rings& rings, uint64_t bytes, size_t send_len, size_t recv_len) {
  const int w = static_cast<int>(rings.size());
  OnEveryRank(w, [&](int r) {
    // The send buffer repeats with its length, so byte k of the stream is
    // send[k % send_len].
    std::vector<char> send(send_len);
    for (size_t k = 0; k < send_len; ++k) send[k] = StreamByte(r, k);
    std::vector<char> recv(recv_len, 0);
    absl::Status status = rings[r]->Shift(send.data(), send.size(), recv.data(), recv.size(), bytes,
                                          absl::Seconds(20));
    ASSERT_TRUE(status.ok()) << "rank " << r << ": " << status;
    const int left = (r + w - 1) % w;
    int wrong = 0;
    for (uint64_t k = bytes > recv_len ? bytes - recv_len : 0; k < bytes; ++k) {
      if (recv[k % recv_len] != StreamByte(left, k % send_len)) ++wrong;
    }
    EXPECT_EQ(wrong, 0) << "rank " << r << " got wrong bytes from rank " << left;
  });
}

TEST(LoopbackRingTest, TwoRanksShareOneConnectionBothWays) {
  Rings rings = ConnectRing(2);
  ASSERT_EQ(rings.size(), 2u);
  ASSERT_TRUE(rings[0] && rings[1]);
  EXPECT_GT(rings[0]->send_buffer_bytes(), 0);
  ShiftAndCheck(rings, 1000, 1000, 1000);
  ShiftAndCheck(rings, 3 << 20, 3 << 20, 3 << 20);  // more than a send buffer
  ShiftAndCheck(rings, 10007, 4096, 3000);          // wraps around both buffers
  ShiftAndCheck(rings, 1, 1, 1);
}

TEST(LoopbackRingTest, ThreeRanksShiftToTheRight) {
  Rings rings = ConnectRing(3);
  ASSERT_EQ(rings.size(), 3u);
  ASSERT_TRUE(rings[0] && rings[1] && rings[2]);
  for (int i = 0; i < 3; ++i) ShiftAndCheck(rings, (2 << 20) + 3, 1 << 20, (1 << 20) + 5);
}

TEST(LoopbackRingTest, ZeroBytesIsNothing) {
  Rings rings = ConnectRing(2);
  ASSERT_TRUE(rings[0] && rings[1]);
  EXPECT_TRUE(rings[0]->Shift(nullptr, 0, nullptr, 0, 0, absl::Seconds(1)).ok());
}

TEST(LoopbackRingTest, SilentNeighbourTimesOutNamingIt) {
  Rings rings = ConnectRing(2);
  ASSERT_TRUE(rings[0] && rings[1]);
  std::vector<char> send(1 << 10), recv(1 << 10);
  const absl::Time start = absl::Now();
  absl::Status status = rings[0]->Shift(send.data(), send.size(), recv.data(), recv.size(), 1 << 10,
                                        absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsDeadlineExceeded(status)) << status;
  EXPECT_NE(status.message().find("rank 1 sent nothing more"), std::string::npos) << status;
  EXPECT_NE(status.message().find("--timeout"), std::string::npos) << status;
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(3));
  // Its streams are out of step now: every later call says so.
  absl::Status again =
      rings[0]->Shift(send.data(), send.size(), recv.data(), recv.size(), 1, absl::Seconds(1));
  EXPECT_TRUE(absl::IsFailedPrecondition(again)) << again;
}

TEST(LoopbackRingTest, NeighbourThatStopsReadingTimesOutTheSender) {
  // Of 3 ranks, rank 1 never shifts. Rank 0 gets its bytes from rank 2 but
  // cannot send more than the socket buffers hold to rank 1; rank 2 sends
  // to rank 0 but gets nothing from rank 1. Each names rank 1.
  Rings rings = ConnectRing(3);
  ASSERT_TRUE(rings[0] && rings[1] && rings[2]);
  const uint64_t bytes = 64 << 20;
  std::vector<absl::Status> status(3);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int r : {0, 2}) {
    threads.emplace_back([&, r] {
      std::vector<char> buffer(1 << 20);
      status[r] = rings[r]->Shift(buffer.data(), buffer.size(), buffer.data(), buffer.size(), bytes,
                                  absl::Milliseconds(500));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(absl::IsDeadlineExceeded(status[0])) << status[0];
  EXPECT_NE(status[0].message().find("rank 1 took no more bytes"), std::string::npos) << status[0];
  EXPECT_TRUE(absl::IsDeadlineExceeded(status[2])) << status[2];
  EXPECT_NE(status[2].message().find("rank 1 sent nothing more"), std::string::npos) << status[2];
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(LoopbackRingTest, ClosedNeighbourFailsAtOnceNamingIt) {
  Rings rings = ConnectRing(3);
  ASSERT_TRUE(rings[0] && rings[1] && rings[2]);
  rings[2].reset();  // rank 2, rank 0's left neighbour, is gone
  std::vector<char> send(1 << 10), recv(1 << 10);
  const absl::Time start = absl::Now();
  absl::Status status = rings[0]->Shift(send.data(), send.size(), recv.data(), recv.size(), 1 << 10,
                                        absl::Seconds(30));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rank 2 closed its connection"), std::string::npos) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(LoopbackRingTest, StrangerIsTurnedAwayAndTheNeighbourStillConnects) {
  absl::StatusOr<std::unique_ptr<LoopbackListener>> l0 = LoopbackListener::Open();
  absl::StatusOr<std::unique_ptr<LoopbackListener>> l1 = LoopbackListener::Open();
  ASSERT_TRUE(l0.ok() && l1.ok());
  // A stranger connects to rank 1 first and says something else.
  const int stranger = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>((*l1)->port()));
  ASSERT_EQ(connect(stranger, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const char junk[8] = {'G', 'E', 'T', ' ', '/', ' ', 'H', 'T'};
  ASSERT_EQ(write(stranger, junk, sizeof(junk)), static_cast<ssize_t>(sizeof(junk)));
  const std::vector<int> ports = {(*l0)->port(), (*l1)->port()};
  Rings rings(2);
  OnEveryRank(2, [&](int r) {
    absl::StatusOr<std::unique_ptr<LoopbackRing>> ring =
        LoopbackRing::Connect(r, 2, ports, r == 0 ? **l0 : **l1, 1 << 20, absl::Seconds(10));
    ASSERT_TRUE(ring.ok()) << "rank " << r << ": " << ring.status();
    rings[r] = *std::move(ring);
  });
  close(stranger);
  ShiftAndCheck(rings, 4096, 4096, 4096);
}

TEST(LoopbackRingTest, MissingNeighbourFailsConnectInTime) {
  // Rank 1 of 3 listens but never connects to rank 2, which waits for it.
  absl::StatusOr<std::unique_ptr<LoopbackListener>> listener = LoopbackListener::Open();
  ASSERT_TRUE(listener.ok());
  const std::vector<int> ports = {1, 1, (*listener)->port()};
  const absl::Time start = absl::Now();
  // Rank 2 connects to rank 0 at port 1 first: refused, named.
  absl::StatusOr<std::unique_ptr<LoopbackRing>> ring =
      LoopbackRing::Connect(2, 3, ports, **listener, 1 << 20, absl::Milliseconds(300));
  ASSERT_FALSE(ring.ok());
  EXPECT_NE(ring.status().message().find("rank 0 at 127.0.0.1:1"), std::string::npos)
      << ring.status();
  // On 2 ranks rank 1 only accepts: nobody comes, and it says who it waited for.
  absl::StatusOr<std::unique_ptr<LoopbackRing>> lonely = LoopbackRing::Connect(
      1, 2, {1, (*listener)->port()}, **listener, 1 << 20, absl::Milliseconds(300));
  ASSERT_FALSE(lonely.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(lonely.status())) << lonely.status();
  EXPECT_NE(lonely.status().message().find("rank 0 did not connect"), std::string::npos)
      << lonely.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace distbench

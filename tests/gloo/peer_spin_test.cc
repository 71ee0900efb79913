// Polling a peer's socket before Gloo's blocking read
// (plugins/backends/gloo/peer_spin.h), on real loopback TCP connections:
// when it polls at all, that it returns once data is there, and that it
// gives up after its budget when none comes.
#include "plugins/backends/gloo/peer_spin.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/job_cpus.hpp"
#include "gtest/gtest.h"

namespace dist_gloo {
namespace {

// Both ends of a TCP connection over 127.0.0.1, closed with the object.
struct LoopbackConnection {
  int listener = -1;
  int client = -1;
  int server = -1;

  LoopbackConnection() {
    listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&address), length) != 0) return;
    server = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  }
  ~LoopbackConnection() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

TEST(BothEndsOnThisHost, ALoopbackConnectionIsLocalAtBothEnds) {
  LoopbackConnection connection;
  ASSERT_GE(connection.server, 0) << "could not connect over 127.0.0.1";
  EXPECT_TRUE(BothEndsOnThisHost(connection.client));
  EXPECT_TRUE(BothEndsOnThisHost(connection.server));
}

TEST(BothEndsOnThisHost, NotForWhatIsNotAConnectedInternetSocket) {
  EXPECT_FALSE(BothEndsOnThisHost(-1));
  LoopbackConnection connection;
  ASSERT_GE(connection.listener, 0);
  EXPECT_FALSE(BothEndsOnThisHost(connection.listener));  // listening: no peer
  int unix_pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, unix_pair), 0);
  EXPECT_FALSE(BothEndsOnThisHost(unix_pair[0]));
  close(unix_pair[0]);
  close(unix_pair[1]);
}

// A group of `ranks` ranks on this host: this one (rank 0) and ranks - 1
// loopback connections to the others.
struct LocalGroup {
  std::vector<LoopbackConnection> connections;
  std::vector<int> sockets;  // indexed by rank; -1 for rank 0
  explicit LocalGroup(int ranks) : connections(static_cast<size_t>(ranks - 1)) {
    sockets.push_back(-1);
    for (const LoopbackConnection& c : connections) sockets.push_back(c.client);
  }
};

TEST(PeerSpin, NeverPollsWhenTheRanksOnThisHostOutnumberItsCpus) {
  LocalGroup group(dist::JobCpus() + 1);
  EXPECT_FALSE(PeerSpin(group.sockets, absl::Seconds(10)).polls());
  // Not polling, it returns at once although nothing will come.
  const absl::Time start = absl::Now();
  PeerSpin(group.sockets, absl::Seconds(10)).AwaitData(1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PeerSpin, PollsWhereEveryRankHasACpu) {
  if (dist::JobCpus() < 2) GTEST_SKIP() << "one CPU: two ranks never fit it";
  LocalGroup group(2);
  EXPECT_TRUE(PeerSpin(group.sockets, absl::Microseconds(50)).polls());
  EXPECT_FALSE(PeerSpin(group.sockets, absl::ZeroDuration()).polls());  // 0: off
}

TEST(PeerSpin, ReturnsWhenDataArrivesAndGivesUpAfterTheBudget) {
  if (dist::JobCpus() < 2) GTEST_SKIP() << "one CPU: two ranks never fit it";
  LocalGroup group(2);
  const int from_peer = group.connections[0].server;  // the peer's end writes here
  // A budget far longer than the test may take: it can only return early
  // because the data came.
  PeerSpin spin(group.sockets, absl::Seconds(30));
  ASSERT_TRUE(spin.polls());
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    const char byte = 'x';
    (void)send(from_peer, &byte, 1, MSG_NOSIGNAL);
  });
  const absl::Time start = absl::Now();
  spin.AwaitData(1);
  const absl::Duration waited = absl::Now() - start;
  writer.join();
  EXPECT_GE(waited, absl::Milliseconds(40)) << "returned before anything was sent";
  EXPECT_LT(waited, absl::Seconds(10)) << "did not notice the data";
  char byte = 0;
  ASSERT_EQ(recv(group.sockets[1], &byte, 1, MSG_DONTWAIT), 1);  // and it is still there
  EXPECT_EQ(byte, 'x');

  // Nothing comes: it gives up after its budget (and not long before).
  PeerSpin short_spin(group.sockets, absl::Milliseconds(20));
  const absl::Time again = absl::Now();
  short_spin.AwaitData(1);
  const absl::Duration gave_up = absl::Now() - again;
  EXPECT_GE(gave_up, absl::Milliseconds(20));
  EXPECT_LT(gave_up, absl::Seconds(10));

  // A peer that hung up ends the poll at once too (the read then fails).
  close(group.connections[0].server);
  group.connections[0].server = -1;
  const absl::Time closed = absl::Now();
  spin.AwaitData(1);
  EXPECT_LT(absl::Now() - closed, absl::Seconds(10));
}

// A message larger than one segment: AwaitData returns at its first piece
// and says so (the caller then reads it busy-polling, AwakeRead); a small
// one, or none, it does not flag.
TEST(PeerSpin, SaysWhenTheFirstPieceOfALargeMessageIsThere) {
  if (dist::JobCpus() < 2) GTEST_SKIP() << "one CPU: two ranks never fit it";
  LocalGroup group(2);
  const int from_peer = group.connections[0].server;
  PeerSpin spin(group.sockets, absl::Seconds(30));
  const size_t payload = 256 << 10;
  std::vector<char> bytes(payload, 'y');
  std::thread writer([&] {
    (void)send(from_peer, bytes.data(), 1000, MSG_NOSIGNAL);
    absl::SleepFor(absl::Seconds(2));
    (void)send(from_peer, bytes.data() + 1000, bytes.size() - 1000, MSG_NOSIGNAL);
  });
  const absl::Time start = absl::Now();
  const bool arriving = spin.AwaitData(1, payload);
  const absl::Duration waited = absl::Now() - start;
  writer.join();
  EXPECT_TRUE(arriving);
  EXPECT_LT(waited, absl::Seconds(1)) << "waited for more than the first piece";
  // The same bytes queued, but a message of one segment: nothing to flag.
  EXPECT_FALSE(spin.AwaitData(1, 4096));
  // Nothing comes within a short budget: nothing arriving either.
  LocalGroup quiet(2);
  EXPECT_FALSE(PeerSpin(quiet.sockets, absl::Microseconds(100)).AwaitData(1, payload));
}

// Polls that find nothing shorten the next (halving, down to a sixteenth
// of the budget); one that finds its message lengthens it again.
TEST(PeerSpin, PollsLessAfterPollsThatFoundNothing) {
  if (dist::JobCpus() < 2) GTEST_SKIP() << "one CPU: two ranks never fit it";
  LocalGroup group(2);
  PeerSpin spin(group.sockets, absl::Milliseconds(160));
  auto timed = [&] {
    const absl::Time start = absl::Now();
    spin.AwaitData(1);
    return absl::Now() - start;
  };
  EXPECT_GE(timed(), absl::Milliseconds(150));  // the whole budget
  for (int i = 0; i < 4; ++i) timed();          // 80, 40, 20, 10 ms
  EXPECT_LT(timed(), absl::Milliseconds(80)) << "still polling the whole budget";
  // A message: found at once, and the next poll is longer again.
  const char byte = 'z';
  ASSERT_EQ(send(group.connections[0].server, &byte, 1, MSG_NOSIGNAL), 1);
  EXPECT_LT(timed(), absl::Milliseconds(80));
  char read_back = 0;
  ASSERT_EQ(recv(group.sockets[1], &read_back, 1, MSG_DONTWAIT), 1);
  EXPECT_GE(timed(), absl::Milliseconds(18));  // 10 ms doubled to 20
}

TEST(PeerSpin, IgnoresRanksItHasNoSocketFor) {
  LocalGroup group(2);
  PeerSpin spin(group.sockets, absl::Seconds(30));
  const absl::Time start = absl::Now();
  spin.AwaitData(0);   // this rank: -1
  spin.AwaitData(7);   // out of range
  spin.AwaitData(-1);  // out of range
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace dist_gloo

// Which connections join two ranks on this host, and taking the kernel's
// pacing off them (plugins/backends/gloo/local_pairs.h), on real sockets:
// TCP over loopback, and a Unix socket pair as a connection that is not TCP.
#include "plugins/backends/gloo/local_pairs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

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

std::string CongestionControl(int fd) {
  char name[32] = {};
  socklen_t length = sizeof(name) - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return "";
  return name;
}

bool SetCongestionControl(int fd, const std::string& name) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), name.size()) == 0;
}

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

TEST(StopPacing, BbrBecomesReno) {
  LoopbackConnection connection;
  ASSERT_GE(connection.server, 0);
  if (!SetCongestionControl(connection.client, "bbr")) {
    GTEST_SKIP() << "this kernel offers no bbr to set (net.ipv4.tcp_available_congestion_control)";
  }
  ASSERT_EQ(CongestionControl(connection.client), "bbr");
  EXPECT_TRUE(StopPacing(connection.client));
  EXPECT_EQ(CongestionControl(connection.client), "reno");
  // The connection still carries data both ways.
  const char sent[] = "after";
  char received[sizeof(sent)] = {};
  ASSERT_EQ(send(connection.client, sent, sizeof(sent), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(sent)));
  ASSERT_EQ(recv(connection.server, received, sizeof(received), MSG_WAITALL),
            static_cast<ssize_t>(sizeof(sent)));
  EXPECT_EQ(std::string(received), "after");
}

TEST(StopPacing, LeavesEveryOtherCongestionControlAlone) {
  LoopbackConnection connection;
  ASSERT_GE(connection.server, 0);
  ASSERT_TRUE(SetCongestionControl(connection.client, "reno"));  // always allowed
  EXPECT_FALSE(StopPacing(connection.client));
  EXPECT_EQ(CongestionControl(connection.client), "reno");
  if (SetCongestionControl(connection.client, "cubic")) {
    EXPECT_FALSE(StopPacing(connection.client));
    EXPECT_EQ(CongestionControl(connection.client), "cubic");
  }
  // Not a TCP socket at all: nothing to change, and no error.
  int unix_pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, unix_pair), 0);
  EXPECT_FALSE(StopPacing(unix_pair[0]));
  close(unix_pair[0]);
  close(unix_pair[1]);
  EXPECT_FALSE(StopPacing(-1));
}

}  // namespace
}  // namespace dist_gloo

// The TCP store under faults: garbage, oversized and malformed frames, a
// wrong or missing token, a port in use, a server that goes away, clients
// that come before the server, IPv6 and host names.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_client.h"
#include "plugins/store/tcp_store_server.h"
#include "tests/rendezvous/test_support.h"

namespace dist::store {
namespace {

std::unique_ptr<TcpStoreServer> StartServer(const std::string& token = "",
                                            const std::string& host = "127.0.0.1",
                                            int port = 0) {
  TcpStoreServerOptions options;
  options.bind_host = host;
  options.port = port;
  options.token = token;
  options.log = [](const std::string& line) { fprintf(stderr, "server: %s\n", line.c_str()); };
  auto server = TcpStoreServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

absl::StatusOr<std::unique_ptr<TcpStoreClient>> Client(int port, const std::string& token = "",
                                                       absl::Duration timeout = absl::Seconds(5),
                                                       const std::string& host = "127.0.0.1") {
  TcpStoreClientOptions options;
  options.host = host;
  options.port = port;
  options.token = token;
  options.timeout = timeout;
  return TcpStoreClient::Connect(options);
}

// A raw loopback socket for speaking (bad) protocol by hand.
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawSocket() { close(fd_); }
  bool connected() const { return connected_; }
  void Send(const std::string& bytes) {
    (void)send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // True when the server closed the connection within `timeout` (reading and
  // discarding anything it sent first).
  bool ClosedByServer(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    char buffer[4096];
    while (absl::Now() < deadline) {
      pollfd entry = {fd_, POLLIN, 0};
      if (poll(&entry, 1, 50) <= 0) continue;
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

std::string Hello(const std::string& token = "") {
  protocol::Writer w;
  w.U32(protocol::kMagic);
  w.U16(protocol::kVersion);
  w.Str(token);
  return std::move(w).Finish();
}

// Another client can still use the store normally.
void ExpectServerStillServes(int port) {
  auto client = Client(port);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("alive", "yes").ok());
  EXPECT_EQ((*client)->Get("alive", absl::Seconds(1)).value(), "yes");
}

TEST(TcpStoreFaults, GarbageBeforeHandshakeIsDropped) {
  auto server = StartServer();
  auto bystander = Client(server->port());
  ASSERT_TRUE(bystander.ok());
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.connected());
  raw.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  EXPECT_GE(server->dropped_clients(), 1);
  // The client that was connected all along still works, and new ones too.
  ASSERT_TRUE((*bystander)->Set("k", "v").ok());
  ExpectServerStillServes(server->port());
}

TEST(TcpStoreFaults, SilentConnectionIsDroppedAfterTheHelloTimeout) {
  TcpStoreServerOptions options;
  options.bind_host = "127.0.0.1";
  options.hello_timeout = absl::Milliseconds(300);
  auto server = TcpStoreServer::Start(options);
  ASSERT_TRUE(server.ok());
  auto client = Client((*server)->port());  // says hello at once: kept
  ASSERT_TRUE(client.ok());
  RawSocket raw((*server)->port());
  raw.Send(std::string("\x05\x00", 2));  // half a header, then silence
  const absl::Time start = absl::Now();
  EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_EQ((*server)->dropped_clients(), 1);
  absl::SleepFor(absl::Milliseconds(400));
  ASSERT_TRUE((*client)->Set("still", "here").ok());
}

TEST(TcpStoreFaults, BadMagicWithSmallFrameIsDropped) {
  auto server = StartServer();
  RawSocket raw(server->port());
  protocol::Writer w;
  w.U32(0xdeadbeef);
  w.U16(protocol::kVersion);
  w.Str("");
  raw.Send(std::move(w).Finish());
  EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  ExpectServerStillServes(server->port());
}

TEST(TcpStoreFaults, OversizedFrameAfterHandshakeIsDroppedWithoutWaitingForIt) {
  auto server = StartServer();
  RawSocket raw(server->port());
  raw.Send(Hello());
  // Announce a 4 GiB frame: the server must drop us at the header, not
  // wait for (or allocate) the body.
  raw.Send(std::string("\xff\xff\xff\xff\x01", 5));
  EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  EXPECT_EQ(server->dropped_clients(), 1);
  ExpectServerStillServes(server->port());
}

TEST(TcpStoreFaults, OversizedKeyAndMalformedRequestsAreDropped) {
  auto server = StartServer();
  {
    RawSocket raw(server->port());
    raw.Send(Hello());
    protocol::Writer w;
    w.U8(static_cast<uint8_t>(protocol::Op::kSet));
    w.Str(std::string(DIST_STORE_MAX_KEY_BYTES + 1, 'k'));
    w.Str("v");
    raw.Send(std::move(w).Finish());
    EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  }
  {
    RawSocket raw(server->port());
    raw.Send(Hello());
    protocol::Writer w;
    w.U8(99);  // unknown opcode
    raw.Send(std::move(w).Finish());
    EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  }
  {
    RawSocket raw(server->port());
    raw.Send(Hello());
    protocol::Writer w;  // a string length that runs past the frame
    w.U8(static_cast<uint8_t>(protocol::Op::kGet));
    w.U32(1000);
    w.U8('k');
    raw.Send(std::move(w).Finish());
    EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  }
  {
    RawSocket raw(server->port());
    raw.Send(Hello());
    protocol::Writer w;  // a wait claiming a billion keys
    w.U8(static_cast<uint8_t>(protocol::Op::kWait));
    w.U32(1000000000);
    w.I64(1000);
    raw.Send(std::move(w).Finish());
    EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  }
  EXPECT_EQ(server->dropped_clients(), 4);
  ExpectServerStillServes(server->port());
}

TEST(TcpStoreFaults, DroppedClientWithParkedGetDoesNotDisturbOthers) {
  auto server = StartServer();
  auto waiter = Client(server->port());
  ASSERT_TRUE(waiter.ok());
  std::thread get([&] {
    absl::StatusOr<std::string> value = (*waiter)->Get("late", absl::Seconds(10));
    EXPECT_TRUE(value.ok()) << value.status();
    if (value.ok()) {
      EXPECT_EQ(*value, "finally");
    }
  });
  {
    RawSocket raw(server->port());
    raw.Send(Hello());
    protocol::Writer w;  // park a get, then vanish
    w.U8(static_cast<uint8_t>(protocol::Op::kGet));
    w.Str("late");
    w.I64(60000);
    raw.Send(std::move(w).Finish());
    absl::SleepFor(absl::Milliseconds(100));
  }
  absl::SleepFor(absl::Milliseconds(100));
  auto setter = Client(server->port());
  ASSERT_TRUE(setter.ok());
  ASSERT_TRUE((*setter)->Set("late", "finally").ok());
  get.join();
}

TEST(TcpStoreFaults, WrongTokenIsRefusedClearlyAndOthersAreServed) {
  auto server = StartServer("s3cret");
  auto good = Client(server->port(), "s3cret");
  ASSERT_TRUE(good.ok()) << good.status();
  const absl::Time start = absl::Now();
  auto bad = Client(server->port(), "guess");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "refused the token")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "DIST_STORE_TOKEN")) << bad.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // refused, not retried
  auto none = Client(server->port(), "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "requires a token")) << none.status();
  ASSERT_TRUE((*good)->Set("k", "v").ok());
  auto again = Client(server->port(), "s3cret");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Get("k", absl::Seconds(1)).value(), "v");
}

TEST(TcpStoreFaults, PortInUseNamesTheAddressAndTheFix) {
  auto first = StartServer();
  TcpStoreServerOptions options;
  options.bind_host = "127.0.0.1";
  options.port = first->port();
  auto second = TcpStoreServer::Start(options);
  ASSERT_FALSE(second.ok());
  const std::string message(second.status().message());
  EXPECT_TRUE(absl::StrContains(message, absl::StrCat("127.0.0.1:", first->port()))) << message;
  EXPECT_TRUE(absl::StrContains(message, "already in use")) << message;
  EXPECT_TRUE(absl::StrContains(message, "pick another port")) << message;
  ExpectServerStillServes(first->port());
}

TEST(TcpStoreFaults, ClientRetriesUntilTheServerComesUp) {
  const int port = testing::FreePort();
  std::unique_ptr<TcpStoreServer> server;
  std::thread late([&] {
    absl::SleepFor(absl::Milliseconds(500));
    server = StartServer("", "127.0.0.1", port);
  });
  auto client = Client(port, "", absl::Seconds(10));
  late.join();
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());
}

TEST(TcpStoreFaults, NoServerIsATimeoutNamingTheAddress) {
  const int port = testing::FreePort();
  const absl::Time start = absl::Now();
  auto client = Client(port, "", absl::Milliseconds(700));
  const absl::Duration elapsed = absl::Now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(client.status().message(), absl::StrCat("127.0.0.1:", port)))
      << client.status();
  EXPECT_GE(elapsed, absl::Milliseconds(600));
  EXPECT_LT(elapsed, absl::Seconds(3));
}

TEST(TcpStoreFaults, ServerGoneIsUnavailableNamingTheAddressNotAHang) {
  auto server = StartServer();
  const int port = server->port();
  auto client = Client(port, "", absl::Seconds(30));
  ASSERT_TRUE(client.ok());
  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(300));
    server->Stop();
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = (*client)->Get("never", absl::Seconds(30));
  stopper.join();
  ASSERT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), absl::StrCat("127.0.0.1:", port)))
      << got.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // Later calls fail fast too.
  const absl::Time again = absl::Now();
  absl::Status set = (*client)->Set("k", "v");
  EXPECT_EQ(set.code(), absl::StatusCode::kUnavailable) << set;
  EXPECT_TRUE(absl::StrContains(set.message(), "is gone")) << set;
  EXPECT_LT(absl::Now() - again, absl::Seconds(5));
}

TEST(TcpStoreFaults, ClientEnforcesItsDeadlineWhenTheServerNeverAnswers) {
  // A "server" that completes the handshake and then says nothing more.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  listen(listener, 4);
  std::atomic<bool> stop{false};
  std::thread mute([&] {
    const int fd = accept(listener, nullptr, nullptr);
    char hello[64];
    (void)recv(fd, hello, sizeof(hello), 0);
    protocol::Writer reply;
    reply.U32(protocol::kMagic);
    reply.U16(protocol::kVersion);
    reply.U8(0);
    reply.Str("");
    const std::string frame = std::move(reply).Finish();
    (void)send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    while (!stop) absl::SleepFor(absl::Milliseconds(20));
    close(fd);
  });
  auto client = Client(ntohs(address.sin_port), "", absl::Seconds(1));
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> got = (*client)->Get("k", absl::Milliseconds(300));
  const absl::Duration elapsed = absl::Now() - start;
  stop = true;
  mute.join();
  close(listener);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "no answer from the store server"))
      << got.status();
  // The request's 300 ms plus the client's 2 s grace, not forever.
  EXPECT_LT(elapsed, absl::Seconds(4));
}

TEST(TcpStoreFaults, IPv6LoopbackAndHostNames) {
  TcpStoreServerOptions options;
  options.bind_host = "::1";
  auto server = TcpStoreServer::Start(options);
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status();
  EXPECT_TRUE(absl::StartsWith((*server)->address(), "[::1]:")) << (*server)->address();
  auto client = Client((*server)->port(), "", absl::Seconds(5), "::1");
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("v6", "works").ok());
}

TEST(TcpStoreFaults, HostNamesResolveForServerAndClient) {
  // "localhost" maps to 127.0.0.1 and/or ::1 depending on /etc/hosts; the
  // server binds what it resolves to and the client tries each address.
  auto server = StartServer("", "localhost");
  ASSERT_NE(server, nullptr);
  auto by_name = Client(server->port(), "", absl::Seconds(5), "localhost");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  ASSERT_TRUE((*by_name)->Set("named", "works").ok());
  EXPECT_EQ((*by_name)->Get("named", absl::Seconds(1)).value(), "works");
}

TEST(TcpStoreFaults, UnknownHostIsReportedByName) {
  auto client = Client(29500, "", absl::Milliseconds(500), "no-such-host.invalid");
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::StrContains(client.status().message(), "no-such-host.invalid"))
      << client.status();
}

TEST(TcpStoreFaults, ServerWaitsForClientsToLeave) {
  auto server = StartServer();
  auto client = Client(server->port());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Set("k", "v").ok());
  EXPECT_EQ(server->clients(), 1);
  EXPECT_FALSE(server->WaitForClientsToLeave(absl::Milliseconds(200)));
  std::thread leaver([&] {
    absl::SleepFor(absl::Milliseconds(200));
    (*client)->Disconnect();
  });
  const absl::Time start = absl::Now();
  EXPECT_TRUE(server->WaitForClientsToLeave(absl::Seconds(5)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  leaver.join();
  EXPECT_EQ(server->clients(), 0);
}

TEST(TcpStoreFaults, ParkedGetsDoNotBlockOtherClients) {
  auto server = StartServer();
  constexpr int kWaiters = 16;
  std::vector<std::thread> waiters;
  std::atomic<int> woke{0};
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&] {
      auto client = Client(server->port());
      ASSERT_TRUE(client.ok());
      if ((*client)->Get("go", absl::Seconds(10)).ok()) ++woke;
    });
  }
  auto other = Client(server->port());
  ASSERT_TRUE(other.ok());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE((*other)->Add("busy", 1).ok());
  ASSERT_TRUE((*other)->Set("go", "now").ok());
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(woke.load(), kWaiters);
}

}  // namespace
}  // namespace dist::store

// The TCP store under faults: garbage, oversized and malformed frames, a
// wrong or missing token, a port in use, a server that goes away, clients
// that come before the server, IPv6 and host names; a failed rendezvous
// reported to the server (kFail); peers of older protocol versions; a
// pooled connection closed under a request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "plugins/store/net.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_client.h"
#include "plugins/store/tcp_store_server.h"
#include "support/auth.h"
#include "tests/rendezvous/raw_frames.h"
#include "tests/rendezvous/test_support.h"

namespace dist::store {
namespace {

using dist::testing::ListenOnLoopback;
using dist::testing::ReadFrame;

std::unique_ptr<TcpStoreServer> StartServer(const std::string& token = "",
                                            const std::string& host = "127.0.0.1", int port = 0,
                                            bool keep_failures = false) {
  TcpStoreServerOptions options;
  options.keep_failures = keep_failures;
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
  void Send(const std::string& bytes) { (void)send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // One frame's payload, or "" after 5 s or at the end of the stream.
  std::string ReadFrame() {
    std::string payload;
    return testing::ReadFrame(fd_, &payload, absl::Seconds(5)) ? payload : "";
  }
  // The version 3 handshake by hand (protocol.h); true when welcomed.
  bool Handshake(const std::string& token = "") {
    const std::string client_nonce = support::auth::Nonce();
    protocol::Writer hello;
    hello.U32(protocol::kMagic);
    hello.U16(protocol::kVersion);
    hello.Str(client_nonce);
    Send(std::move(hello).Finish());
    const std::string challenge_frame = ReadFrame();
    protocol::Reader challenge(challenge_frame);
    uint32_t magic = 0;
    uint16_t version = 0;
    uint8_t code = 0, required = 0;
    std::string message, server_nonce, server_proof;
    if (!challenge.U32(&magic) || !challenge.U16(&version) || !challenge.U8(&code) ||
        !challenge.Str(4096, &message) || code != 0 || !challenge.Str(64, &server_nonce) ||
        !challenge.U8(&required) || !challenge.Str(64, &server_proof)) {
      return false;
    }
    protocol::Writer proof;
    proof.Str(token.empty() ? std::string()
                            : support::auth::Proof(token, support::auth::Role::kClient,
                                                   client_nonce, server_nonce));
    Send(std::move(proof).Finish());
    const std::string welcome = ReadFrame();
    return !welcome.empty() && welcome[0] == 0;
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

// A hello as protocol versions 1 and 2 wrote it: the token in clear.
std::string OldHello(const std::string& token, uint16_t version) {
  protocol::Writer w;
  w.U32(protocol::kMagic);
  w.U16(version);
  w.Str(token);
  return std::move(w).Finish();
}

// Another client can still use the store normally.
void ExpectServerStillServesWithToken(int port, const std::string& token) {
  auto client = Client(port, token);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("alive", "yes").ok());
  EXPECT_EQ((*client)->Get("alive", absl::Seconds(1)).value(), "yes");
}

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
  options.limits.handshake_timeout = absl::Milliseconds(300);
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
  w.Str(std::string(32, 'n'));
  raw.Send(std::move(w).Finish());
  EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  ExpectServerStillServes(server->port());
}

TEST(TcpStoreFaults, OversizedFrameAfterHandshakeIsDroppedWithoutWaitingForIt) {
  auto server = StartServer();
  RawSocket raw(server->port());
  ASSERT_TRUE(raw.Handshake());
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
    ASSERT_TRUE(raw.Handshake());
    protocol::Writer w;
    w.U8(static_cast<uint8_t>(protocol::Op::kSet));
    w.Str(std::string(DIST_STORE_MAX_KEY_BYTES + 1, 'k'));
    w.Str("v");
    raw.Send(std::move(w).Finish());
    EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  }
  {
    RawSocket raw(server->port());
    ASSERT_TRUE(raw.Handshake());
    protocol::Writer w;
    w.U8(99);  // unknown opcode
    raw.Send(std::move(w).Finish());
    EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  }
  {
    RawSocket raw(server->port());
    ASSERT_TRUE(raw.Handshake());
    protocol::Writer w;  // a string length that runs past the frame
    w.U8(static_cast<uint8_t>(protocol::Op::kGet));
    w.U32(1000);
    w.U8('k');
    raw.Send(std::move(w).Finish());
    EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  }
  {
    RawSocket raw(server->port());
    ASSERT_TRUE(raw.Handshake());
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
    ASSERT_TRUE(raw.Handshake());
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

// A rank killed while its get is parked (not read by the server) frees its
// connection at once, not at the get's timeout: rank 0's linger counts it.
TEST(TcpStoreFaults, AClientGoneWhileParkedIsNoticedAtOnce) {
  auto server = StartServer();
  {
    RawSocket raw(server->port());
    ASSERT_TRUE(raw.Handshake());
    protocol::Writer w;
    w.U8(static_cast<uint8_t>(protocol::Op::kGet));
    w.Str("never");
    w.I64(600000);
    raw.Send(std::move(w).Finish());
    const absl::Time parked = absl::Now() + absl::Seconds(10);
    while (server->clients() != 1 && absl::Now() < parked) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_EQ(server->clients(), 1);
  }
  EXPECT_TRUE(server->WaitForClientsToLeave(absl::Seconds(10)));
  ExpectServerStillServes(server->port());
}

TEST(TcpStoreFaults, WrongTokenIsRefusedClearlyAndOthersAreServed) {
  auto server = StartServer("s3cret");
  auto good = Client(server->port(), "s3cret");
  ASSERT_TRUE(good.ok()) << good.status();
  const absl::Time start = absl::Now();
  auto bad = Client(server->port(), "guess");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(),
                                absl::StrCat("the store server at 127.0.0.1:", server->port(),
                                             " could not prove that it holds this rank's token")))
      << bad.status();
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

// The server side of the version 3 handshake, without a token.
bool Welcome(int fd) {
  std::string hello;
  if (!ReadFrame(fd, &hello)) return false;
  protocol::Writer challenge;
  challenge.U32(protocol::kMagic);
  challenge.U16(protocol::kVersion);
  challenge.U8(0);
  challenge.Str("");
  challenge.Str(support::auth::Nonce());
  challenge.U8(0);  // no token
  challenge.Str("");
  std::string frame = std::move(challenge).Finish();
  (void)send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
  std::string proof;
  if (!ReadFrame(fd, &proof)) return false;
  protocol::Writer welcome;
  welcome.U8(0);
  welcome.Str("");
  frame = std::move(welcome).Finish();
  return send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size());
}

TEST(TcpStoreFaults, ClientEnforcesItsDeadlineWhenTheServerNeverAnswers) {
  // A "server" that completes the handshake and then says nothing more.
  int listener_port = 0;
  const int listener = ListenOnLoopback(&listener_port);
  ASSERT_GE(listener, 0);
  std::atomic<bool> stop{false};
  std::thread mute([&] {
    const int fd = accept(listener, nullptr, nullptr);
    Welcome(fd);
    while (!stop) absl::SleepFor(absl::Milliseconds(20));
    close(fd);
  });
  auto client = Client(listener_port, "", absl::Seconds(1));
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

// A request on a pooled connection that the server closes before any byte
// of the reply (as it closes idle connections when full: nothing unread, so
// the request was not processed) is sent once more on a new connection;
// not after part of a reply, and not on a connection that was new.
TEST(TcpStoreFaults, APooledConnectionClosedBeforeTheReplyIsRetriedOnceOnANewOne) {
  int listener_port = 0;
  const int listener = ListenOnLoopback(&listener_port);
  ASSERT_GE(listener, 0);
  // What the fake server does with each connection's requests, in order:
  // 'p' answers two bytes of the reply and closes, 'c' closes unanswered,
  // 'a' answers OK.
  const std::vector<std::string> scripts = {"p", "c", "ac", "a"};
  std::vector<int> requests(scripts.size(), 0);
  std::thread fake([&] {
    for (size_t i = 0; i < scripts.size(); ++i) {
      pollfd entry = {listener, POLLIN, 0};
      if (poll(&entry, 1, 10000) <= 0) return;
      const int fd = accept(listener, nullptr, nullptr);
      if (!Welcome(fd)) {
        close(fd);
        return;
      }
      protocol::Writer ok;
      ok.U8(0);
      const std::string reply = std::move(ok).Finish();
      std::string request;
      for (char step : scripts[i]) {
        if (!ReadFrame(fd, &request)) break;
        ++requests[i];
        if (step == 'p') (void)send(fd, reply.data(), 2, MSG_NOSIGNAL);
        if (step == 'a') (void)send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      close(fd);
    }
  });
  auto client = Client(listener_port, "", absl::Seconds(5));
  ASSERT_TRUE(client.ok()) << client.status();
  // Pooled, closed after part of the reply: reported, not retried.
  absl::Status partial = (*client)->Set("k", "1");
  EXPECT_EQ(partial.code(), absl::StatusCode::kUnavailable) << partial;
  EXPECT_TRUE(absl::StrContains(partial.message(), "lost the connection to the store server"))
      << partial;
  // A new connection closed before the reply: reported, not retried.
  absl::Status fresh = (*client)->Set("k", "2");
  EXPECT_EQ(fresh.code(), absl::StatusCode::kUnavailable) << fresh;
  EXPECT_TRUE(absl::StrContains(fresh.message(), "lost the connection to the store server"))
      << fresh;
  // A new connection that answers, and is pooled.
  EXPECT_TRUE((*client)->Set("k", "3").ok());
  // Pooled, closed before any byte of the reply: sent again on a new one.
  EXPECT_TRUE((*client)->Set("k", "4").ok());
  fake.join();
  close(listener);
  EXPECT_EQ(requests, (std::vector<int>{1, 1, 2, 1}));
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

// What a client of protocol version 1 or 2 (earlier releases) is told at
// its hello: the hello reply's code and message.
struct OldExchange {
  uint16_t server_version = 0;
  uint8_t hello_code = 0;
  std::string hello_message;
};

OldExchange SpeakOldVersion(int port, uint16_t version, const std::string& token = "") {
  OldExchange out;
  RawSocket raw(port);
  EXPECT_TRUE(raw.connected());
  raw.Send(OldHello(token, version));
  const std::string reply = raw.ReadFrame();
  protocol::Reader reader(reply);
  uint32_t magic = 0;
  EXPECT_TRUE(reader.U32(&magic) && reader.U16(&out.server_version) && reader.U8(&out.hello_code) &&
              reader.Str(4096, &out.hello_message));
  EXPECT_TRUE(raw.ClosedByServer(absl::Seconds(5)));
  return out;
}

constexpr char kFailedText[] = ": the rendezvous on this store already failed: ";

// Rank 0's server (keep_failures): once one rank reports its failed
// rendezvous, a rank parked in a wait hears it at once, every new client is
// refused with the first reason (one line), and later reports do not
// replace it.
TEST(TcpStoreFailure, ReportedFailureReachesWaitersAndRefusesLateClients) {
  auto server = StartServer("", "127.0.0.1", 0, /*keep_failures=*/true);
  ASSERT_NE(server, nullptr);
  const std::string expected =
      absl::StrCat("tcp://127.0.0.1:", server->port(), kFailedText,
                   "join timed out; rank 2 missing; start all ranks again");
  auto waiter = Client(server->port());
  ASSERT_TRUE(waiter.ok()) << waiter.status();
  absl::StatusOr<std::string> waited = absl::UnknownError("not run");
  absl::Duration waited_for;
  std::thread parked([&] {
    const absl::Time start = absl::Now();
    waited = (*waiter)->Get("never-set", absl::Seconds(20));
    waited_for = absl::Now() - start;
  });
  absl::SleepFor(absl::Milliseconds(200));  // let the get park on the server
  auto reporter = Client(server->port());
  ASSERT_TRUE(reporter.ok()) << reporter.status();
  (*reporter)->Abandon("join timed out;\nrank 2 missing");
  parked.join();
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kFailedPrecondition) << waited.status();
  EXPECT_EQ(waited.status().message(), expected);
  EXPECT_LT(waited_for, absl::Seconds(5)) << "told at once, not at the get's timeout";
  EXPECT_EQ(server->failure(), expected);

  // Requests on connections opened before the failure get the reason too.
  absl::Status set = (*waiter)->Set("k", "v");
  EXPECT_EQ(set.code(), absl::StatusCode::kFailedPrecondition) << set;
  EXPECT_EQ(set.message(), expected);

  // A late client is refused at the hello, at once and without retrying.
  const absl::Time start = absl::Now();
  auto late = Client(server->port(), "", absl::Seconds(10));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  EXPECT_EQ(late.status().message(), expected);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  // The first reason stands.
  auto second = Client(server->port());
  EXPECT_FALSE(second.ok());
  (*waiter)->Abandon("another reason");
  EXPECT_EQ(server->failure(), expected);

  EXPECT_EQ(server->dropped_clients(), 2) << "the refused handshakes";
}

// The reason is cut to one bounded line, and the reporter is named.
TEST(TcpStoreFailure, ReasonIsOneBoundedLineNamingTheReporter) {
  auto server = StartServer("", "127.0.0.1", 0, /*keep_failures=*/true);
  ASSERT_NE(server, nullptr);
  TcpStoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = server->port();
  options.timeout = absl::Seconds(5);
  options.reporter = "rank 1 on testhost:42";
  auto client = TcpStoreClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  (*client)->Abandon("short\r\nreason");
  EXPECT_TRUE(absl::StrContains(server->failure(),
                                "already failed: short  reason (reported by rank 1 on "
                                "testhost:42); start all ranks again"))
      << server->failure();

  auto other = StartServer("", "127.0.0.1", 0, /*keep_failures=*/true);
  ASSERT_NE(other, nullptr);
  auto long_client = Client(other->port());
  ASSERT_TRUE(long_client.ok());
  (*long_client)->Abandon(std::string(100000, 'x'));
  const std::string failure = other->failure();
  EXPECT_TRUE(absl::StrContains(failure, "xxx...; start all ranks again")) << failure.size();
  EXPECT_LT(failure.size(), protocol::kMaxReasonBytes + 200);
}

// dist_store_server (keep_failures off) outlives jobs: a job's failure is
// logged, and the next job is served.
TEST(TcpStoreFailure, LongLivedServerKeepsServingAfterAReport) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = Client(server->port());
  ASSERT_TRUE(client.ok());
  (*client)->Abandon("the old job timed out");
  EXPECT_EQ(server->failure(), "");
  EXPECT_TRUE((*client)->Set("k", "v").ok());
  ExpectServerStillServes(server->port());
}

// Old client, new server: clients of versions 1 and 2 (which sent the
// token in clear) are refused at their hello with a message naming both
// versions, which they read like any refusal; a newer version too.
TEST(TcpStoreVersions, OldClientsAreRefusedNamingBothVersions) {
  auto server = StartServer("s3cret");
  ASSERT_NE(server, nullptr);
  for (uint16_t version : {1, 2, 99}) {
    const OldExchange old = SpeakOldVersion(server->port(), version, "s3cret");
    EXPECT_EQ(old.hello_code, static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition));
    EXPECT_EQ(old.server_version, protocol::kVersion);
    EXPECT_TRUE(absl::StrContains(old.hello_message,
                                  absl::StrCat("speaks protocol version ", protocol::kVersion)))
        << old.hello_message;
    EXPECT_TRUE(
        absl::StrContains(old.hello_message, absl::StrCat("this client speaks version ", version)))
        << old.hello_message;
    EXPECT_TRUE(absl::StrContains(old.hello_message, "same dist release")) << old.hello_message;
  }
  EXPECT_EQ(server->clients(), 0);
  ExpectServerStillServesWithToken(server->port(), "s3cret");
}

// New client, old server: a server of version 2 refuses the version 3
// hello as it refused any version it did not know; the client reports
// both versions at once and never falls back to sending its token.
TEST(TcpStoreVersions, NewClientRefusesAnOldServerWithoutSendingTheToken) {
  int listener_port = 0;
  const int listener = ListenOnLoopback(&listener_port);
  ASSERT_GE(listener, 0);
  std::string received;
  std::thread old_server([&] {
    pollfd entry = {listener, POLLIN, 0};
    if (poll(&entry, 1, 5000) <= 0) return;
    const int fd = accept(listener, nullptr, nullptr);
    char buffer[4096];
    pollfd readable = {fd, POLLIN, 0};
    if (poll(&readable, 1, 5000) > 0) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n > 0) received.assign(buffer, static_cast<size_t>(n));
    }
    protocol::Writer reply;
    reply.U32(protocol::kMagic);
    reply.U16(2);
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition));
    reply.Str("the store server speaks protocol versions 1 to 2 but this client speaks 3");
    const std::string frame = std::move(reply).Finish();
    (void)send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    // Anything more the client sends would show up here.
    while (poll(&readable, 1, 500) > 0) {
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      received.append(buffer, static_cast<size_t>(n));
    }
    close(fd);
  });
  const absl::Time start = absl::Now();
  auto client = Client(listener_port, "the-secret-token", absl::Seconds(10));
  old_server.join();
  close(listener);
  ASSERT_FALSE(client.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "reported at once, not retried";
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "speaks protocol version 2"))
      << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "this client speaks version 3"))
      << client.status();
  EXPECT_FALSE(absl::StrContains(received, "the-secret-token"));
  EXPECT_EQ(received.size(), 4u + 4 + 2 + 4 + 32) << "the hello only";
}

}  // namespace
}  // namespace dist::store

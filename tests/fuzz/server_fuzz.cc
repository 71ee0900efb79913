// libFuzzer target: the TCP store server's handling of one connection. A
// real server (small limits, short timeouts) serves one end of a socketpair;
// the input is written to the other end as a client would, then the replies
// are read until the server closes or goes quiet. When the first byte is
// odd, a valid handshake comes first, so the input reaches the requests.
// Between runs the server must still serve a well-behaved client.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_client.h"
#include "plugins/store/tcp_store_server.h"
#include "support/auth.h"

namespace {

using dist::store::protocol::Writer;

dist::store::TcpStoreServer* Server() {
  static dist::store::TcpStoreServer* server = [] {
    dist::store::TcpStoreServerOptions options;
    options.bind_host = "127.0.0.1";
    options.keep_failures = false;
    options.limits.max_request_bytes = 1 << 20;
    options.limits.max_buffered_bytes = 8 << 20;
    options.limits.max_store_bytes = 16 << 20;
    options.limits.handshake_timeout = absl::Seconds(2);
    options.limits.stall_timeout = absl::Seconds(2);
    auto started = dist::store::TcpStoreServer::Start(options);
    if (!started.ok()) abort();
    return started->release();
  }();
  return server;
}

void WriteAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    pollfd entry = {fd, POLLOUT, 0};
    if (poll(&entry, 1, 1000) <= 0) return;  // the server stopped reading
    const ssize_t n =
        send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return;
    if (n > 0) sent += static_cast<size_t>(n);
  }
}

// Reads replies until the server closes the connection or says nothing for
// a moment (a parked request).
void Drain(int fd) {
  char buffer[65536];
  while (true) {
    pollfd entry = {fd, POLLIN, 0};
    if (poll(&entry, 1, 5) <= 0) return;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dist::store::TcpStoreServer* server = Server();
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) abort();
  server->Adopt(pair[0]);
  std::string input(reinterpret_cast<const char*>(data), size);
  if (size > 0 && (data[0] & 1)) {
    Writer hello;
    hello.U32(dist::store::protocol::kMagic);
    hello.U16(dist::store::protocol::kVersion);
    hello.Str(std::string(dist::support::auth::kNonceBytes, 'n'));
    Writer proof;
    proof.Str("");
    input = std::move(hello).Finish() + std::move(proof).Finish() + input.substr(1);
  }
  WriteAll(pair[1], input);
  Drain(pair[1]);
  close(pair[1]);
  // Every few runs: the server still serves a real client.
  static int runs = 0;
  if (++runs % 256 == 0) {
    dist::store::TcpStoreClientOptions options;
    options.host = "127.0.0.1";
    options.port = server->port();
    options.timeout = absl::Seconds(10);
    auto client = dist::store::TcpStoreClient::Connect(options);
    if (!client.ok() || !(*client)->Set("fuzz/alive", "yes").ok()) abort();
  }
  return 0;
}

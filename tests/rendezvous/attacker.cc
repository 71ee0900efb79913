#include "tests/rendezvous/attacker.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "plugins/store/protocol.h"
#include "support/auth.h"
#include "tests/rendezvous/raw_frames.h"

namespace dist::testing {

namespace protocol = store::protocol;

int RawConnect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Sends what the socket takes of `bytes` until `deadline`; the bytes sent.
size_t SendUntil(int fd, const std::string& bytes, absl::Time deadline) {
  size_t sent = 0;
  while (sent < bytes.size() && absl::Now() < deadline) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
    pollfd entry = {fd, POLLOUT, 0};
    poll(&entry, 1, 20);
  }
  return sent;
}

// Whether the server closed `fd` by `deadline` (reading and discarding what
// it sent).
bool ClosedBy(int fd, absl::Time deadline) {
  char buffer[4096];
  while (absl::Now() < deadline) {
    pollfd entry = {fd, POLLIN, 0};
    if (poll(&entry, 1, 50) <= 0) continue;
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

// Reads one frame's payload (blocking up to 10 s); "" on failure.
std::string ReadFrame(int fd) {
  std::string payload;
  return ReadFrame(fd, &payload) ? payload : "";
}

std::string HelloFrame(const std::string& nonce) {
  protocol::Writer hello;
  hello.U32(protocol::kMagic);
  hello.U16(protocol::kVersion);
  hello.Str(nonce);
  return std::move(hello).Finish();
}

// The version 3 handshake by hand with `token`: "welcomed" when the server
// let the client in, else the server's refusal.
std::string RefusalAfterProof(int fd, const std::string& token) {
  const std::string nonce = support::auth::Nonce();
  SendUntil(fd, HelloFrame(nonce), absl::Now() + absl::Seconds(10));
  const std::string frame = ReadFrame(fd);
  protocol::Reader challenge(frame);
  uint32_t magic = 0;
  uint16_t version = 0;
  uint8_t code = 0, required = 0;
  std::string message, server_nonce, proof;
  if (!challenge.U32(&magic) || !challenge.U16(&version) || !challenge.U8(&code) ||
      !challenge.Str(4096, &message) || code != 0 || !challenge.Str(64, &server_nonce) ||
      !challenge.U8(&required) || !challenge.Str(64, &proof)) {
    return absl::StrCat("no challenge: ", message);
  }
  protocol::Writer answer;
  answer.Str(token.empty()
                 ? std::string()
                 : support::auth::Proof(token, support::auth::Role::kClient, nonce, server_nonce));
  SendUntil(fd, std::move(answer).Finish(), absl::Now() + absl::Seconds(10));
  const std::string welcome = ReadFrame(fd);
  protocol::Reader result(welcome);
  if (!result.U8(&code) || !result.Str(4096, &message)) return "no welcome";
  return code == 0 ? "welcomed" : message;
}

// True when the server welcomed us.
bool Handshake(int fd, const std::string& token) {
  return RefusalAfterProof(fd, token) == "welcomed";
}

Sockets::~Sockets() {
  for (int fd : fds) close(fd);
}

int OpenCrowd(int port, int count, Crowd crowd, const std::string& token, Sockets* sockets) {
  int joined = 0;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  for (int i = 0; i < count && absl::Now() < deadline; ++i) {
    const int fd = RawConnect(port);
    if (fd < 0) continue;
    sockets->fds.push_back(fd);
    joined += crowd == Crowd::kSilent || Handshake(fd, token) ? 1 : 0;
  }
  return joined;
}

}  // namespace dist::testing

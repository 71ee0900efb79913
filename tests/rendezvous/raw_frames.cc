#include "tests/rendezvous/raw_frames.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "absl/time/clock.h"
#include "plugins/store/protocol.h"

namespace dist::testing {
namespace {

// Reads exactly `size` bytes before `deadline`.
bool ReadExactly(int fd, char* out, size_t size, absl::Time deadline) {
  size_t got = 0;
  while (got < size) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd entry = {fd, POLLIN, 0};
    const int ready = poll(
        &entry, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000)));
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    const ssize_t n = recv(fd, out + got, size - got, 0);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 64) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

bool ReadFrame(int fd, std::string* payload, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  char header[store::protocol::kFrameHeaderBytes];
  if (!ReadExactly(fd, header, sizeof(header), deadline)) return false;
  payload->assign(store::protocol::DecodeLength(header), '\0');
  return ReadExactly(fd, payload->data(), payload->size(), deadline);
}

}  // namespace dist::testing

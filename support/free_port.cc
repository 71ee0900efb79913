#include "support/free_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace dist {

absl::StatusOr<int> PickFreePort(const std::string& address) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    length = sizeof(*v4);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    length = sizeof(*v6);
  } else {  // a host name: any local address will do for finding a port
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    length = sizeof(*v4);
  }
  int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create a socket to find a free port: ", strerror(errno)));
  }
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&storage), length) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) == 0) {
    port = ntohs(storage.ss_family == AF_INET ? v4->sin_port : v6->sin6_port);
  }
  int saved = errno;
  close(fd);
  if (port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind a free port on ", address, ": ",
                                               strerror(saved),
                                               "; check that it is an address of this host"));
  }
  return port;
}

}  // namespace dist

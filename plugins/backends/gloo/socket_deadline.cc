#include "plugins/backends/gloo/socket_deadline.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace dist_gloo {
namespace {

void SetSocketTimeout(int socket, bool for_read, absl::Duration timeout) {
  const timeval tv = absl::ToTimeval(timeout);
  // Best effort: a socket already shut down (an abort) keeps what it had.
  setsockopt(socket, SOL_SOCKET, for_read ? SO_RCVTIMEO : SO_SNDTIMEO, &tv, sizeof(tv));
}

}  // namespace

void SocketDeadline::Await(int socket, bool for_read, absl::Duration* timeout) {
  if (socket < 0 || deadline_ == absl::InfiniteFuture()) return;
  pollfd ready = {socket, static_cast<short>(for_read ? POLLIN : POLLOUT), 0};
  for (;;) {
    const absl::Duration left = deadline_ - absl::Now();
    const int64_t ms =
        std::max<int64_t>(0, absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))));
    const int rc = poll(&ready, 1, static_cast<int>(std::min<int64_t>(ms, INT32_MAX)));
    if (rc > 0) break;  // it can move bytes, or it closed: Gloo's call tells which
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return;  // leave it to Gloo's own wait
    throw gloo::IoException(absl::StrCat(for_read ? "Read timeout" : "Write timeout",
                                         ": nothing could be ", for_read ? "read" : "written",
                                         " within the operation's ",
                                         absl::FormatDuration(absl::FromChrono(pair_timeout_))));
  }
  const absl::Duration left = deadline_ - absl::Now();
  if (*timeout <= left / 2) return;
  *timeout = std::max(left / 4, absl::Milliseconds(1));
  SetSocketTimeout(socket, for_read, *timeout);
}

void SocketDeadline::Restore() {
  deadline_ = absl::InfiniteFuture();
  const absl::Duration pair = absl::FromChrono(pair_timeout_);
  if (send_timeout_ != absl::InfiniteDuration() && send_socket_ >= 0) {
    SetSocketTimeout(send_socket_, false, pair);
  }
  if (recv_timeout_ != absl::InfiniteDuration() && recv_socket_ >= 0) {
    SetSocketTimeout(recv_socket_, true, pair);
  }
  send_timeout_ = recv_timeout_ = absl::InfiniteDuration();
}

}  // namespace dist_gloo

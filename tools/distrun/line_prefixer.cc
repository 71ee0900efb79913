#include "tools/distrun/line_prefixer.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include <utility>

namespace dist::distrun {

LinePrefixer::LinePrefixer(std::string prefix, int fd) : prefix_(std::move(prefix)), fd_(fd) {}

void LinePrefixer::Append(absl::string_view data) {
  // Everything complete in this chunk goes out in a single write.
  std::string out;
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == absl::string_view::npos) {
      size_t room = kMaxLine - partial_.size();
      if (data.size() < room) {
        partial_.append(data.data(), data.size());
        break;
      }
      // Over-long line: emit a piece of it as if it were a line.
      partial_.append(data.data(), room);
      data.remove_prefix(room);
      out += prefix_;
      out += partial_;
      out += '\n';
      partial_.clear();
      continue;
    }
    out += prefix_;
    out += partial_;
    out.append(data.data(), newline + 1);
    partial_.clear();
    data.remove_prefix(newline + 1);
  }
  if (!out.empty()) WriteAll(fd_, out);
}

void LinePrefixer::Flush() {
  if (partial_.empty()) return;
  std::string out = prefix_ + partial_ + "\n";
  partial_.clear();
  WriteAll(fd_, out);
}

void WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // Someone made our stdout non-blocking: wait until it drains.
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 1000);
    } else if (errno != EINTR) {
      return;  // EPIPE, EBADF: nobody is reading; dropping output is all we can do
    }
  }
}

}  // namespace dist::distrun

// A file descriptor closed when it goes out of scope.
#ifndef DIST_CORE_SCOPED_FD_H_
#define DIST_CORE_SCOPED_FD_H_

#include <unistd.h>

namespace dist {

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;

 private:
  int fd_;
};

}  // namespace dist

#endif  // DIST_CORE_SCOPED_FD_H_

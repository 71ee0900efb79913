#include "tools/distinfo/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dist::distinfo {
namespace {

struct Child {
  pid_t pid = -1;
  int fd = -1;  // read end of its pipe; -1 once closed
  bool reaped = false;
};

// Reads what is available now; closes the pipe at end of file.
void Drain(Child& child, ChildResult& result) {
  char buffer[4096];
  while (child.fd >= 0) {
    ssize_t n = read(child.fd, buffer, sizeof(buffer));
    if (n > 0) {
      result.output.append(buffer, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n < 0 && errno == EAGAIN) return;
      close(child.fd);  // end of file, or a broken pipe
      child.fd = -1;
    }
  }
}

void Record(int status, ChildResult& result) {
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
}

}  // namespace

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::vector<ChildResult> RunInChildren(const std::vector<ChildFunction>& functions,
                                       absl::Duration timeout) {
  std::vector<ChildResult> results(functions.size());
  std::vector<Child> children(functions.size());
  std::fflush(nullptr);  // a child must not write out the parent's buffered output again
  for (size_t i = 0; i < functions.size(); ++i) {
    int fds[2];
    if (pipe(fds) != 0) {
      results[i].exit_code = 127;
      children[i].reaped = true;
      continue;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      for (size_t j = 0; j < i; ++j) {
        if (children[j].fd >= 0) close(children[j].fd);
      }
      dup2(STDERR_FILENO, STDOUT_FILENO);
      const int code = functions[i](fds[1]);
      _exit(code);
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      results[i].exit_code = 127;
      children[i].reaped = true;
      continue;
    }
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    children[i].pid = pid;
    children[i].fd = fds[0];
  }

  const absl::Time deadline = absl::Now() + timeout;
  auto running = [&] {
    return std::any_of(children.begin(), children.end(), [](const Child& c) { return !c.reaped; });
  };
  while (running()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    std::vector<pollfd> polled;
    for (const Child& c : children) {
      if (c.fd >= 0) polled.push_back({c.fd, POLLIN, 0});
    }
    // Short waits: a child can end without closing its pipe (a grandchild
    // it started may hold it), so waitpid is checked on every turn too.
    const int wait_ms =
        static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 20));
    poll(polled.data(), polled.size(), wait_ms);
    for (size_t i = 0; i < children.size(); ++i) {
      Child& c = children[i];
      Drain(c, results[i]);
      if (c.reaped) continue;
      int status = 0;
      if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.reaped = true;
        Record(status, results[i]);
        Drain(c, results[i]);  // what it wrote just before it ended
        if (c.fd >= 0) {
          close(c.fd);
          c.fd = -1;
        }
      }
    }
  }
  for (size_t i = 0; i < children.size(); ++i) {
    Child& c = children[i];
    if (!c.reaped) {
      kill(c.pid, SIGKILL);
      // A process stuck in the kernel (a wedged driver) dies only when it
      // leaves it; do not wait for that forever. An unreaped one is left to
      // init when distinfo exits.
      const absl::Time give_up = absl::Now() + absl::Seconds(2);
      int status = 0;
      while (waitpid(c.pid, &status, WNOHANG) == 0 && absl::Now() < give_up) {
        absl::SleepFor(absl::Milliseconds(10));
      }
      Drain(c, results[i]);
      results[i].timed_out = true;
      results[i].signal = SIGKILL;
    }
    if (c.fd >= 0) close(c.fd);
  }
  return results;
}

}  // namespace dist::distinfo

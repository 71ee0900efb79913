// ScopedSigpipeBlock in a host that ignores SIGPIPE (as Python does): the
// scope leaves the thread's mask alone (it makes no syscalls), and a write
// to a closed socket inside it neither kills the process nor leaves a
// signal behind.
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "dist/cpp/no_sigpipe.hpp"
#include "gtest/gtest.h"

namespace {

bool Blocked() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

TEST(NoSigpipeIgnoredByHost, TheScopeTouchesNothing) {
  ASSERT_TRUE(dist::SigpipeIgnoredByHost());
  {
    dist::ScopedSigpipeBlock block;
    EXPECT_FALSE(Blocked());  // no pthread_sigmask: the host's ignore is enough
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    close(fds[1]);
    char byte = 'x';
    EXPECT_EQ(write(fds[0], &byte, 1), -1);
    EXPECT_EQ(errno, EPIPE);
    close(fds[0]);
  }
  EXPECT_FALSE(Blocked());
  EXPECT_FALSE(dist::SigpipePending());
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);  // the host's choice, before dist runs anything
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

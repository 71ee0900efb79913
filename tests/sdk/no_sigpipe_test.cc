// ScopedSigpipeBlock: a write to a closed socket inside it raises no
// SIGPIPE that survives the scope, the thread's mask comes back as it was,
// a SIGPIPE the host had pending already stays pending, and the process-wide
// disposition is never touched.
#include "dist/cpp/no_sigpipe.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace {

bool Blocked() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

// A write to a socket whose peer is closed, without MSG_NOSIGNAL (as Gloo does).
void WriteToClosedSocket() {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  close(fds[1]);
  char byte = 'x';
  EXPECT_EQ(write(fds[0], &byte, 1), -1);
  EXPECT_EQ(errno, EPIPE);  // errno survives the scope's own calls
  close(fds[0]);
}

TEST(NoSigpipe, WriteInsideTheScopeNeitherKillsNorLeavesASignal) {
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &before), 0);
  ASSERT_EQ(before.sa_handler, SIG_DFL);  // default action: a leak would kill the test
  ASSERT_FALSE(Blocked());
  {
    dist::ScopedSigpipeBlock block;
    EXPECT_TRUE(Blocked());
    WriteToClosedSocket();
    EXPECT_TRUE(dist::SigpipePending());
  }
  EXPECT_FALSE(Blocked());
  EXPECT_FALSE(dist::SigpipePending());
  struct sigaction after {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, SIG_DFL);
}

TEST(NoSigpipe, ASignalTheHostHadPendingIsLeftAlone) {
  sigset_t pipe = dist::SigpipeSet();
  sigset_t old;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &pipe, &old), 0);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
  {
    dist::ScopedSigpipeBlock block;
    WriteToClosedSocket();
  }
  EXPECT_TRUE(Blocked());  // the host's own mask, restored
  EXPECT_TRUE(dist::SigpipePending());
  const struct timespec zero = {0, 0};
  EXPECT_EQ(sigtimedwait(&pipe, nullptr, &zero), SIGPIPE);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

volatile sig_atomic_t delivered = 0;

// A scope told that none of its writes failed restores the mask without
// collecting: a SIGPIPE pending then is not a write's (the host raised it
// at this thread) and reaches the host's handler. Without the word, the
// scope collects it, as it would a failed write's.
TEST(NoSigpipe, NoWriteFailedSkipsTheCollectingAndLeavesTheHostsSignal) {
  struct sigaction counting {};
  counting.sa_handler = [](int) { delivered = delivered + 1; };
  struct sigaction before {};
  ASSERT_EQ(sigaction(SIGPIPE, &counting, &before), 0);
  {
    dist::ScopedSigpipeBlock block;
    ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
    EXPECT_EQ(delivered, 0);  // blocked while inside
    block.NoWriteFailed();
  }
  EXPECT_EQ(delivered, 1);
  EXPECT_FALSE(Blocked());
  {
    dist::ScopedSigpipeBlock block;
    ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
  }
  EXPECT_EQ(delivered, 1);
  EXPECT_FALSE(dist::SigpipePending());
  ASSERT_EQ(sigaction(SIGPIPE, &before, nullptr), 0);
}

TEST(NoSigpipe, AnInnerScopeLeavesTheWorkToTheOuterOne) {
  ASSERT_FALSE(Blocked());
  {
    dist::ScopedSigpipeBlock outer;
    {
      dist::ScopedSigpipeBlock inner;  // as around each MPI call of a wait
      WriteToClosedSocket();
    }
    EXPECT_TRUE(Blocked());               // the inner scope restored nothing
    EXPECT_TRUE(dist::SigpipePending());  // nor collected the signal
  }
  EXPECT_FALSE(Blocked());
  EXPECT_FALSE(dist::SigpipePending());
}

TEST(NoSigpipe, AScopeInAThreadBlockedForGoodChangesNothing) {
  bool blocked_after = false;
  bool pending_after = false;
  pthread_t thread;
  struct Result {
    bool* blocked;
    bool* pending;
  } result{&blocked_after, &pending_after};
  ASSERT_EQ(pthread_create(
                &thread, nullptr,
                [](void* out) -> void* {
                  dist::BlockSigpipeInThisThread();
                  {
                    dist::ScopedSigpipeBlock block;
                    WriteToClosedSocket();
                  }
                  auto* r = static_cast<Result*>(out);
                  *r->blocked = Blocked();
                  *r->pending = dist::SigpipePending();  // harmless: blocked for good
                  return nullptr;
                },
                &result),
            0);
  pthread_join(thread, nullptr);
  EXPECT_TRUE(blocked_after);
  EXPECT_TRUE(pending_after);
  EXPECT_FALSE(Blocked());
}

TEST(NoSigpipe, ThreadsStartedInsideInheritTheBlock) {
  bool blocked_in_thread = false;
  {
    dist::ScopedSigpipeBlock block;
    pthread_t thread;
    ASSERT_EQ(pthread_create(
                  &thread, nullptr,
                  [](void* out) -> void* {
                    *static_cast<bool*>(out) = Blocked();
                    return nullptr;
                  },
                  &blocked_in_thread),
              0);
    pthread_join(thread, nullptr);
  }
  EXPECT_TRUE(blocked_in_thread);
  EXPECT_FALSE(Blocked());
}

}  // namespace

// Keeping SIGPIPE away from the host without touching its disposition.
//
// A write to a socket whose peer died raises SIGPIPE in the writing thread;
// its default action ends the process with no message (exit 141). dist lives
// inside other people's processes, so it never changes the process-wide
// disposition (the host may rely on it). Instead, for third-party code that
// writes without MSG_NOSIGNAL (Gloo, an MPI library):
//   - threads the plugin starts, directly or through the library, start with
//     SIGPIPE blocked: create them inside a ScopedSigpipeBlock, whose mask
//     they inherit, or call BlockSigpipeInThisThread() first in a thread of
//     your own. A SIGPIPE raised there stays pending on that thread, harmless.
//   - calls into the library on the host's thread run inside a
//     ScopedSigpipeBlock: it blocks SIGPIPE, and on the way out consumes a
//     SIGPIPE that became pending during the call (only if none was pending
//     before, so a host's own pending signal is left alone) and restores the
//     thread's mask. This is the pattern libcurl and OpenSSL users follow.
// Writes dist makes itself use send(..., MSG_NOSIGNAL) instead.
#ifndef DIST_CPP_NO_SIGPIPE_HPP_
#define DIST_CPP_NO_SIGPIPE_HPP_

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

namespace dist {

inline sigset_t SigpipeSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

inline bool SigpipePending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

// For threads the plugin owns: blocks SIGPIPE for the rest of the thread.
inline void BlockSigpipeInThisThread() {
  const sigset_t pipe = SigpipeSet();
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    const sigset_t pipe = SigpipeSet();
    sigemptyset(&old_mask_);
    pthread_sigmask(SIG_BLOCK, &pipe, &old_mask_);
    was_pending_ = SigpipePending();
  }
  ~ScopedSigpipeBlock() {
    const int saved_errno = errno;  // the caller may still read the call's errno
    if (!was_pending_ && SigpipePending()) {
      const sigset_t pipe = SigpipeSet();
      const struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    errno = saved_errno;
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

}  // namespace dist

#endif  // DIST_CPP_NO_SIGPIPE_HPP_

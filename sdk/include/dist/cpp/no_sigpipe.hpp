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
//
// A host that ignores SIGPIPE (SIG_IGN, as Python does and many servers do)
// needs none of this: a SIGPIPE would be discarded. The disposition is read
// once, at the first scope, and then the scopes make no syscalls at all; a
// host that stops ignoring SIGPIPE after that should not (dist never
// changes the disposition, so it cannot know).
//
// A scope whose code knows that none of its writes failed (each write that
// could raise SIGPIPE reports its failure, and none did) says so with
// NoWriteFailed(); it then skips the collecting syscall on the way out.
//
// Scopes nest: an inner scope (one around each MPI call of a polling loop)
// inside an outer one (around the whole wait), or in a thread that blocked
// SIGPIPE for good, costs nothing; only the outermost makes syscalls
// (three: block, collect a SIGPIPE raised meanwhile, restore). Each one
// costs a microsecond or more on a virtual machine, and one per poll made
// an 8 B MPI all_reduce 30 times slower than MPI's own.
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

// Whether the process ignored SIGPIPE when this was first asked (cached).
inline bool SigpipeIgnoredByHost() {
  static const bool ignored = [] {
    struct sigaction current;
    return sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
  }();
  return ignored;
}

namespace internal {
// How many ScopedSigpipeBlock scopes are open on this thread; a thread that
// blocked SIGPIPE for good counts as always inside one.
inline int& SigpipeScopes() {
  thread_local int scopes = 0;
  return scopes;
}
constexpr int kBlockedForGood = 1 << 24;
}  // namespace internal

// For threads the plugin owns: blocks SIGPIPE for the rest of the thread.
inline void BlockSigpipeInThisThread() {
  const sigset_t pipe = SigpipeSet();
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  if (internal::SigpipeScopes() < internal::kBlockedForGood) {
    internal::SigpipeScopes() += internal::kBlockedForGood;
  }
}

class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    if (internal::SigpipeScopes()++ > 0) return;  // an outer scope covers this one
    if (SigpipeIgnoredByHost()) return;           // nothing to keep away
    outermost_ = true;
    const sigset_t pipe = SigpipeSet();
    sigemptyset(&old_mask_);
    pthread_sigmask(SIG_BLOCK, &pipe, &old_mask_);
    // Not blocked before: a SIGPIPE could not have been pending (it would
    // have been delivered, or discarded if ignored). Blocked by the host:
    // one may be, and is the host's to collect.
    was_pending_ = sigismember(&old_mask_, SIGPIPE) == 1 && SigpipePending();
  }
  ~ScopedSigpipeBlock() {
    --internal::SigpipeScopes();
    if (!outermost_) return;
    const int saved_errno = errno;  // the caller may still read the call's errno
    if (!was_pending_ && !no_write_failed_) {
      // Collects a SIGPIPE raised inside the scope, if any (one syscall
      // either way), so that restoring the mask cannot deliver it.
      const sigset_t pipe = SigpipeSet();
      const struct timespec zero = {0, 0};
      while (sigtimedwait(&pipe, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    errno = saved_errno;
  }
  // Every write made inside the scope so far succeeded, and the caller
  // knows it (a write that raised SIGPIPE would have failed with EPIPE and
  // been reported). The scope then restores the mask without collecting
  // first: no SIGPIPE of ours can be pending, and one that is (the host
  // raised it at this thread meanwhile) is delivered as it would have been
  // without dist. One syscall fewer for the outermost scope.
  void NoWriteFailed() { no_write_failed_ = true; }

  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  bool outermost_ = false;
  sigset_t old_mask_;
  bool was_pending_ = false;
  bool no_write_failed_ = false;
};

}  // namespace dist

#endif  // DIST_CPP_NO_SIGPIPE_HPP_

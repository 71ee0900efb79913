// Which process a handle belongs to, across fork().
//
// A child that fork() makes has a copy of its parent's memory, so of its
// process groups and work handles, but none of their threads, and it shares
// their sockets and shared memory with the parent. Used there, they would
// hang the child (a destroy that joins threads the child does not have) or
// end the parent's job (telling its peers the rank left, aborting the shared
// segment, finalizing MPI as the parent's rank). So each handle records the
// process that made it, and the C API refuses it in any other: operations
// fail with FAILED_PRECONDITION, and destroy and abort leave the parent's
// state alone (the child's copy is simply not freed).
#ifndef DIST_CORE_FORK_GUARD_H_
#define DIST_CORE_FORK_GUARD_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace dist {

class ForkOwner {
 public:
  // The calling process owns what is made now.
  ForkOwner();

  // Whether this is a fork() child of the owner (or of its child, ...).
  // One relaxed load: every operation asks.
  bool InForkedChild() const;

  // `function` ("dist_all_reduce") refused for `what` ("process group
  // 'default'") in a forked child: one line naming both processes and the
  // fix.
  absl::Status ChildError(const char* function, const std::string& what) const;

 private:
  uint64_t generation_;  // the process's fork generation when made (fork_guard.cc)
  pid_t pid_;
};

// Keeps `object`, a parent's handle that a forked child destroyed, unfreed
// and reachable for the rest of the child (LeakSanitizer sees it held, not
// leaked): freeing it would act on the parent's threads and peers.
void LeaveUnfreedInChild(const void* object);

}  // namespace dist

#endif  // DIST_CORE_FORK_GUARD_H_

#include "single_copy.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "process_identity.h"

namespace dist_shm {
namespace {

// A random nonzero word, the same for every communicator of this process:
// a peer that reads it back has read this process, not another one that
// holds the same pid in another namespace or after a reuse.
const uint64_t& ProbeWord() {
  static const uint64_t word = [] {
    uint64_t value = 0;
    if (getrandom(&value, sizeof(value), 0) != static_cast<ssize_t>(sizeof(value))) {
      value = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ull;
    }
    return value | 1;
  }();
  return word;
}

// One process_vm_readv call; returns bytes read or -1 with errno.
ssize_t ReadOnce(pid_t pid, uint64_t address, void* to, uint64_t bytes) {
  iovec local{to, bytes};
  iovec remote{reinterpret_cast<void*>(address), bytes};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0);
}

}  // namespace

void PublishProbe(RankControl& self) {
  self.probe_address = reinterpret_cast<uint64_t>(&ProbeWord());
  self.probe_value = ProbeWord();
}

PeerReader::PeerReader(Segment& segment, int rank, bool enabled)
    : segment_(&segment), pidfds_(segment.world_size(), -1) {
  for (int peer = 0; peer < segment.world_size(); ++peer) {
    if (peer == rank) continue;
    const RankControl& sender = segment.rank(peer);
    bool readable = false;
    if (enabled) {
      // The pidfd first, then the identity check: if the process it refers
      // to is the one that registered (pid and start time), it stays that
      // process for as long as the pidfd is open.
      const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, sender.pid, 0));
      const int open_error = errno;
      uint64_t value = 0;
      const ssize_t n =
          pidfd < 0 ? -1 : ReadOnce(sender.pid, sender.probe_address, &value, sizeof(value));
      const int error = pidfd < 0 ? open_error : errno;
      readable = n == static_cast<ssize_t>(sizeof(value)) && value == sender.probe_value &&
                 IsAlive(ProcessIdentity{sender.pid, sender.start_time});
      if (readable) {
        pidfds_[peer] = pidfd;
      } else {
        if (pidfd >= 0) close(pidfd);
        if (unreadable_.empty()) {
          unreadable_ = absl::StrCat(
              "reading rank ", peer, " (pid ", sender.pid, ") ",
              n < 0 ? absl::StrCat("failed: ", std::strerror(error),
                                   error == EPERM ? " (Yama's /proc/sys/kernel/yama/ptrace_scope "
                                                    "above 0, or a seccomp filter)"
                                                  : "")
                    : "found another process (another pid namespace)");
        }
      }
    }
    segment.ring(peer, rank)
        .single_copy.store(readable ? kSingleCopyYes : kSingleCopyNo, std::memory_order_release);
  }
}

PeerReader::~PeerReader() {
  for (int pidfd : pidfds_) {
    if (pidfd >= 0) close(pidfd);
  }
}

bool PeerReader::Exited(int peer) const {
  // A pidfd polls readable once its process has exited; until then (and
  // while it is an unreaped zombie) nobody else can hold its pid.
  pollfd entry{pidfds_[peer], POLLIN, 0};
  int ready;
  do {
    ready = poll(&entry, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

absl::Status PeerReader::Read(int peer, uint64_t address, void* to, uint64_t bytes) const {
  const pid_t pid = segment_->rank(peer).pid;
  char* into = static_cast<char*>(to);
  uint64_t done = 0;
  int error = 0;
  if (pidfds_[peer] < 0) error = EPERM;  // not probed readable: the sender should not have
  while (error == 0 && done < bytes) {
    const ssize_t n = ReadOnce(pid, address + done, into + done, bytes - done);
    if (n > 0) {
      done += static_cast<uint64_t>(n);
    } else if (n == 0) {
      error = EFAULT;  // the range ended
    } else if (errno != EINTR) {
      error = errno;
    }
  }
  if (error == 0 && Exited(peer)) error = ESRCH;
  if (error == 0) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "shm: reading a ", bytes, "-byte message from rank ", peer, " (pid ", pid,
      ") by single copy failed after ", done, " bytes: ", std::strerror(error),
      error == ESRCH    ? " (the sender exited)"
      : error == EFAULT ? " (the sender's buffer is no longer mapped: a buffer must stay valid "
                          "until its operation completes)"
                        : ""));
}

}  // namespace dist_shm

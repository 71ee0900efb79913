#include "single_copy.h"

#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

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

std::string OfferSingleCopy(Segment& segment, int rank, bool enabled) {
  std::string why_not;
  for (int peer = 0; peer < segment.world_size(); ++peer) {
    if (peer == rank) continue;
    const RankControl& sender = segment.rank(peer);
    bool readable = false;
    if (enabled) {
      uint64_t value = 0;
      const ssize_t n = ReadOnce(sender.pid, sender.probe_address, &value, sizeof(value));
      const int error = errno;
      readable = n == static_cast<ssize_t>(sizeof(value)) && value == sender.probe_value;
      if (!readable && why_not.empty()) {
        why_not = absl::StrCat(
            "reading rank ", peer, " (pid ", sender.pid, ") ",
            n < 0 ? absl::StrCat("failed: ", std::strerror(error),
                                 error == EPERM ? " (Yama's /proc/sys/kernel/yama/ptrace_scope "
                                                  "above 0, or a seccomp filter)"
                                                : "")
                  : "returned another process's word (another pid namespace)");
      }
    }
    segment.ring(peer, rank)
        .single_copy.store(readable ? kSingleCopyYes : kSingleCopyNo, std::memory_order_release);
  }
  return why_not;
}

absl::Status ReadFromPeer(pid_t pid, int peer, uint64_t address, void* to, uint64_t bytes) {
  char* into = static_cast<char*>(to);
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ReadOnce(pid, address + done, into + done, bytes - done);
    if (n > 0) {
      done += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    const int error = n < 0 ? errno : EFAULT;  // 0 bytes: the range ended
    return absl::DataLossError(
        absl::StrCat("shm: reading a ", bytes, "-byte message from rank ", peer, " (pid ", pid,
                     ") by single copy failed after ", done, " bytes: ", std::strerror(error),
                     error == ESRCH    ? " (the sender exited)"
                     : error == EFAULT ? " (the sender's buffer is no longer mapped: it must "
                                         "stay valid until its send completes)"
                                       : ""));
  }
  return absl::OkStatus();
}

}  // namespace dist_shm

// Which processes share a host, in the sense that matters to shared memory:
// the same kernel boot, PID namespace and /dev/shm. Host names alone do not
// decide it (containers share them, and namespaces on one machine differ).
// The shm backend checks its ranks with it; the core groups ranks by it for
// hierarchical collectives.
#ifndef DIST_CPP_HOST_IDENTITY_HPP_
#define DIST_CPP_HOST_IDENTITY_HPP_

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace dist {

// "host=<name> boot=<boot id> pidns=<inode> shm=<device>": equal on two
// processes exactly when they see each other's PIDs and share /dev/shm.
inline std::string HostIdentity() {
  char hostname[256] = {0};
  gethostname(hostname, sizeof(hostname) - 1);
  struct stat pidns {};
  stat("/proc/self/ns/pid", &pidns);
  struct stat shm {};
  stat("/dev/shm", &shm);
  std::string boot;
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  if (boot_id) std::getline(boot_id, boot);
  return absl::StrCat("host=", hostname, " boot=", boot, " pidns=", pidns.st_ino,
                      " shm=", shm.st_dev);
}

// A 64-bit digest of a host identity (FNV-1a): the same in every process
// and build, for exchanging identities in fixed-size slots.
inline uint64_t HostIdentityDigest(const std::string& identity) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : identity) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace dist

#endif  // DIST_CPP_HOST_IDENTITY_HPP_

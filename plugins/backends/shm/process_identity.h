// Who a process is (pid plus start time, so a recycled pid is not mistaken
// for the original) and which host/namespace it runs in.
#ifndef DIST_PLUGINS_BACKENDS_SHM_PROCESS_IDENTITY_H_
#define DIST_PLUGINS_BACKENDS_SHM_PROCESS_IDENTITY_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace dist_shm {

struct ProcessIdentity {
  pid_t pid = 0;
  uint64_t start_time = 0;
};

ProcessIdentity SelfIdentity();

// False once the process has exited (including as an unreaped zombie) or its
// pid now belongs to another process.
bool IsAlive(const ProcessIdentity& process);

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_PROCESS_IDENTITY_H_

#include "plugins/backends/nccl/comm_config.h"

#include <set>
#include <string>

#include "absl/synchronization/mutex.h"

namespace dist_nccl {
namespace {

// NCCL keeps the commName pointer for the communicator's whole life (it
// does not copy it), so names live in a process-wide set: a few bytes per
// distinct group name, never freed.
const char* InternName(const std::string& name) {
  static absl::Mutex mu;
  static std::set<std::string>* names = new std::set<std::string>();
  absl::MutexLock lock(&mu);
  return names->insert(name).first->c_str();
}

}  // namespace

ncclConfig_t NonBlockingConfig(const std::string& group) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = InternName(group);
  return config;
}

}  // namespace dist_nccl

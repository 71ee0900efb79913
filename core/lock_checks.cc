#include "core/lock_checks.h"

#include <cstdlib>
#include <cstring>

#include "absl/base/call_once.h"
#include "absl/synchronization/mutex.h"
#include "core/logging.h"

namespace dist {

void ConfigureAbslLockChecks() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    const char* keep = std::getenv("DIST_ABSL_DEADLOCK_DETECTION");
    if (keep != nullptr && std::strcmp(keep, "1") == 0) {
      LogLine(DIST_LOG_DEBUG, "core",
              "absl deadlock detection left on (DIST_ABSL_DEADLOCK_DETECTION=1)");
      return;
    }
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  });
}

}  // namespace dist

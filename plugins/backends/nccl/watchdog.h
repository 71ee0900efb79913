// A thread that calls `tick` every `interval` until destroyed. The
// communicator's watchdog ticks check ncclCommGetAsyncError and the
// deadlines of pending work, and abort the communicator when either fails.
#ifndef DIST_PLUGINS_BACKENDS_NCCL_WATCHDOG_H_
#define DIST_PLUGINS_BACKENDS_NCCL_WATCHDOG_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dist_nccl {

class Watchdog {
 public:
  Watchdog(std::function<void()> tick, absl::Duration interval);
  ~Watchdog();  // stops the thread and joins it
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void Run();

  const std::function<void()> tick_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace dist_nccl

#endif  // DIST_PLUGINS_BACKENDS_NCCL_WATCHDOG_H_

#include "plugins/backends/nccl/watchdog.h"

#include <utility>

namespace dist_nccl {

Watchdog::Watchdog(std::function<void()> tick, absl::Duration interval)
    : tick_(std::move(tick)), interval_(interval), thread_([this] { Run(); }) {}

Watchdog::~Watchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void Watchdog::Run() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_);
      if (stop_) return;
    }
    tick_();
  }
}

}  // namespace dist_nccl

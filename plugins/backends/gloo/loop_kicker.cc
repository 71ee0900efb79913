#include "plugins/backends/gloo/loop_kicker.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <utility>

namespace dist_gloo {

std::shared_ptr<LoopKicker> LoopKicker::Create(std::shared_ptr<gloo::transport::Device> device) {
  return std::shared_ptr<LoopKicker>(new LoopKicker(std::move(device)));
}

LoopKicker::LoopKicker(std::shared_ptr<gloo::transport::Device> device)
    : device_(std::move(device)) {
  auto* tcp = dynamic_cast<gloo::transport::tcp::Device*>(device_.get());
  if (tcp == nullptr) return;
  timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_ < 0) return;
  try {
    tcp->registerDescriptor(timer_, EPOLLIN, this);
    tcp_ = tcp;
  } catch (const std::exception&) {
    // Not registered: Kick arms a timer nobody watches, which is harmless.
  }
}

LoopKicker::~LoopKicker() {
  if (tcp_ != nullptr) {
    if (device_.use_count() == 1) {
      // The last owner: the device's destructor stops its thread, which
      // the timer wakes, and closes the epoll set the timer is in. This
      // object outlives that thread, so its handler is never called late.
      {
        absl::MutexLock lock(&mu_);
        Arm(true);
      }
      device_.reset();
    } else {
      try {
        tcp_->unregisterDescriptor(timer_, this);
      } catch (const std::exception&) {
        // epoll_ctl refused: the timer was not in the set.
      }
    }
  }
  if (timer_ >= 0) close(timer_);
}

void LoopKicker::Begin() {
  absl::MutexLock lock(&mu_);
  if (kicks_++ == 0) Arm(true);
}

void LoopKicker::End() {
  absl::MutexLock lock(&mu_);
  if (--kicks_ == 0) Arm(false);
}

void LoopKicker::Arm(bool on) {
  if (timer_ < 0) return;
  itimerspec spec{};
  if (on) {
    const int64_t ns = absl::ToInt64Nanoseconds(kInterval);
    spec.it_value.tv_nsec = ns;
    spec.it_interval.tv_nsec = ns;
  }
  // Best effort: without the timer, Gloo's waits are only longer.
  (void)timerfd_settime(timer_, 0, &spec, nullptr);
}

void LoopKicker::handleEvents(int /*events*/) {
  uint64_t expirations = 0;
  (void)!read(timer_, &expirations, sizeof(expirations));
}

}  // namespace dist_gloo

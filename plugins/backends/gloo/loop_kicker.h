// Gloo's TCP device, with a timer that makes the device's thread turn
// promptly while the plugin connects, switches or closes pairs.
//
// Gloo 0.5's device thread waits in epoll_wait with a 10 ms timeout, and
// Loop::unregisterDescriptor (called on the caller's thread by
// Pair::connect on the connecting end, by Pair::setSync and by closing a
// connected pair) then waits for that thread's next turn, so that the
// pair's handler is never called again. With no other event on the
// device, each such call waited up to 10 ms, one pair after another:
// dist_destroy took ~45 ms at 4 ranks, the first small collective (which
// switches W - 1 pairs to synchronous mode) up to 10 ms a peer, and the
// device's own destruction (which joins that thread) up to 10 ms more.
// While a Kick is alive, the timer wakes the thread every kInterval.
//
// The kicker owns the device. Its timer stays registered with the
// device's thread until the thread stops, because removing the timer is
// itself such a wait, and the one thing that could kick it is the timer:
// so the kicker must be the device's last owner, and communicators and
// subgroups share one kicker rather than the device.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_LOOP_KICKER_H_
#define DIST_PLUGINS_BACKENDS_GLOO_LOOP_KICKER_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/transport/device.h"
#include "gloo/transport/tcp/device.h"

namespace dist_gloo {

class LoopKicker final : public gloo::transport::tcp::Handler {
 public:
  // How often the device thread turns while kicked: short against Gloo's
  // 10 ms, long enough that a kicked device costs little CPU.
  static constexpr absl::Duration kInterval = absl::Microseconds(100);

  // Takes `device` (non-null). When it is not a Gloo TCP device or no
  // timer can be made, Kick does nothing and Gloo waits as it always did.
  static std::shared_ptr<LoopKicker> Create(std::shared_ptr<gloo::transport::Device> device);

  // With the timer running, drops the device; when that was its last
  // reference, its thread stops within kInterval. Otherwise (a Gloo
  // context still holds the device) removes the timer from the thread,
  // which waits for its next turn as Gloo does.
  ~LoopKicker() override;

  LoopKicker(const LoopKicker&) = delete;
  LoopKicker& operator=(const LoopKicker&) = delete;

  const std::shared_ptr<gloo::transport::Device>& device() const { return device_; }

  // The device thread turns every kInterval while at least one Kick of
  // this kicker is alive. Any thread; nests. Kick(nullptr) does nothing.
  class Kick {
   public:
    explicit Kick(LoopKicker* kicker) : kicker_(kicker) {
      if (kicker_ != nullptr) kicker_->Begin();
    }
    ~Kick() {
      if (kicker_ != nullptr) kicker_->End();
    }
    Kick(const Kick&) = delete;
    Kick& operator=(const Kick&) = delete;

   private:
    LoopKicker* const kicker_;
  };

  // Called on the device thread when the timer fires: reads it.
  void handleEvents(int events) override;

 private:
  explicit LoopKicker(std::shared_ptr<gloo::transport::Device> device);
  void Begin();
  void End();
  void Arm(bool on) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<gloo::transport::Device> device_;
  // Non-null while the timer is registered with the device thread.
  gloo::transport::tcp::Device* tcp_ = nullptr;
  int timer_ = -1;
  absl::Mutex mu_;
  int kicks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_LOOP_KICKER_H_

#include "progress.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm.h"
#include "dist/cpp/no_sigpipe.hpp"

namespace dist_mpi {

ProgressEngine& ProgressEngine::Get() {
  static ProgressEngine* engine = new ProgressEngine();
  return *engine;
}

void ProgressEngine::Register(const std::shared_ptr<Comm>& comm) {
  absl::MutexLock lock(&mu_);
  comms_.push_back(comm);
}

void ProgressEngine::Unregister(const Comm* comm) {
  absl::MutexLock lock(&mu_);
  comms_.erase(std::remove_if(comms_.begin(), comms_.end(),
                              [comm](const std::weak_ptr<Comm>& weak) {
                                std::shared_ptr<Comm> live = weak.lock();
                                return live == nullptr || live.get() == comm;
                              }),
               comms_.end());
}

std::vector<std::shared_ptr<Comm>> ProgressEngine::Snapshot() {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Comm>> live;
  live.reserve(comms_.size());
  for (const std::weak_ptr<Comm>& weak : comms_) {
    if (std::shared_ptr<Comm> comm = weak.lock()) live.push_back(std::move(comm));
  }
  return live;
}

void ProgressEngine::set_enabled(bool enabled) {
  absl::MutexLock lock(&mu_);
  enabled_ = enabled;
}

void ProgressEngine::Start() {
  absl::MutexLock lock(&mu_);
  if (!enabled_ || running_) return;
  running_ = true;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void ProgressEngine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!running_) return;
    stop_ = true;
  }
  thread_.join();
  absl::MutexLock lock(&mu_);
  running_ = false;
}

void ProgressEngine::Loop() {
  dist::BlockSigpipeInThisThread();  // its MPI calls may write to a dead peer
  absl::Duration interval = absl::Milliseconds(2);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), interval)) return;
    }
    // Poll often only while work runs that nobody waits on; a waiter drives
    // MPI itself, and waking up on a busy core would only delay it.
    Comm::Activity most = Comm::Activity::kIdle;
    for (const std::shared_ptr<Comm>& comm : Snapshot()) {
      most = std::max(most, comm->BackgroundProgress());
    }
    switch (most) {
      case Comm::Activity::kUnattended:
        interval = absl::Microseconds(50);
        break;
      case Comm::Activity::kAttended:
        interval = absl::Milliseconds(1);
        break;
      case Comm::Activity::kIdle:
        interval = absl::Milliseconds(5);
        break;
    }
  }
}

}  // namespace dist_mpi

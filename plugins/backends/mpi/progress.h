// The registry of live communicators and the background thread that drives
// their work when nobody waits on it.
//
// Open MPI has no asynchronous progress for shared memory or TCP: a
// non-blocking collective advances only inside MPI calls. So that work
// handles overlap with the caller's compute, this thread polls the oldest
// pending operation of each communicator every 50 us while work is pending
// that nobody has waited on for 200 us. While a caller waits (and so drives
// MPI itself), or has just issued, it
// checks only every 1 ms, and every 5 ms when idle, so it neither competes
// with a waiter for MPI nor steals a busy core from it.
#ifndef DIST_PLUGINS_BACKENDS_MPI_PROGRESS_H_
#define DIST_PLUGINS_BACKENDS_MPI_PROGRESS_H_

#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace dist_mpi {

class Comm;

class ProgressEngine {
 public:
  static ProgressEngine& Get();

  void Register(const std::shared_ptr<Comm>& comm);
  void Unregister(const Comm* comm);

  // Whether a background thread runs; set before Start (option
  // mpi.progress_thread).
  void set_enabled(bool enabled);
  void Start();
  void Stop();

 private:
  ProgressEngine() = default;
  void Loop();
  std::vector<std::shared_ptr<Comm>> Snapshot();

  absl::Mutex mu_;
  std::vector<std::weak_ptr<Comm>> comms_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool enabled_ ABSL_GUARDED_BY(mu_) = true;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_PROGRESS_H_

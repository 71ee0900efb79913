// dist SDK, C++ side: the ordered executor under one communicator. Every
// operation runs alone, in issue order, on whichever thread gets there first:
//   - a blocking call on an idle executor runs on its caller's thread
//     (Claim ... EndClaim): no thread hand-off, no allocation;
//   - an asynchronous one is queued (Submit) for a worker thread, started on
//     first use, unless the caller waits for it before the worker took it
//     (Help): then the caller runs it.
// Header-only; Abseil only.
#ifndef DIST_CPP_ORDERED_EXECUTOR_HPP_
#define DIST_CPP_ORDERED_EXECUTOR_HPP_

#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dist/cpp/completion.hpp"

namespace dist {

class OrderedExecutor {
 public:
  // One queued operation; the work handle shares it.
  struct Task {
    absl::AnyInvocable<absl::Status()> run;  // released once it ran
    // How long running it may take (its own timeout): a waiter runs it only
    // when it is willing to wait that long.
    absl::Duration bound;
    Completion completion;
    // Set by `run` when it left the operation in flight: whoever finishes
    // it completes it (in_flight.hpp), not the executor.
    bool completes_later = false;
  };

  OrderedExecutor() = default;
  OrderedExecutor(const OrderedExecutor&) = delete;
  OrderedExecutor& operator=(const OrderedExecutor&) = delete;
  ~OrderedExecutor() { Stop(); }

  // The lock that defines issue order: hold it while numbering an
  // operation and handing it over (Submit or Claim), so that the order in
  // which operations are numbered is the order in which they run.
  absl::Mutex* mutex() ABSL_LOCK_RETURNED(mu_) { return &mu_; }

  // Queues `task` behind everything issued before it.
  void Submit(std::shared_ptr<Task> task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    queue_.push_back(std::move(task));
    WakeWorker();
  }

  // Whether the caller may run an operation on its own thread now: nothing
  // queued, nothing running. If so, the executor is the caller's until
  // EndClaim (operations issued meanwhile queue behind it).
  bool Claim() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (busy_ || !queue_.empty()) return false;
    busy_ = true;
    return true;
  }

  // After a claimed run: hands what was queued meanwhile to the worker.
  void EndClaim() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    busy_ = false;
    if (!queue_.empty()) WakeWorker();
  }

  // A caller about to wait up to `wait` for `task`: runs it on this thread
  // if it is next, nothing runs, and the caller waits at least as long as it
  // may take. Returns whether it ran here.
  bool Help(Task* task, absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_) {
    if (wait < task->bound) return false;
    std::shared_ptr<Task> mine;
    {
      absl::MutexLock lock(&mu_);
      if (busy_ || queue_.empty() || queue_.front().get() != task) return false;
      mine = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    RunTask(*mine);
    EndClaim();
    return true;
  }

  // Takes `task` out of the queue if it has not started; returns whether
  // it did (a waiter that gives up on an operation that must not start
  // later, because what it uses is the waiter's).
  bool Withdraw(const Task* task) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->get() != task) continue;
      queue_.erase(it);
      return true;
    }
    return false;
  }

  // Removes every queued operation, for the caller to complete (an abort).
  std::deque<std::shared_ptr<Task>> TakeQueued() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::deque<std::shared_ptr<Task>> taken;
    taken.swap(queue_);
    return taken;
  }

  // Runs what is queued, then stops the worker. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      worker_cv_.Signal();
    }
    if (worker_.joinable()) worker_.join();
  }

 private:
  static void RunTask(Task& task) {
    absl::Status status = std::move(task.run)();
    task.run = nullptr;  // what it captured goes now, not with the last handle
    if (!task.completes_later) task.completion.Complete(status);
  }

  void WakeWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!worker_.joinable()) {
      worker_ = std::thread([this] { WorkerLoop(); });
    }
    worker_cv_.Signal();
  }

  void WorkerLoop() {
    for (;;) {
      std::shared_ptr<Task> task;
      {
        absl::MutexLock lock(&mu_);
        while ((queue_.empty() || busy_) && !(stopping_ && queue_.empty())) worker_cv_.Wait(&mu_);
        if (queue_.empty()) return;  // stopping, and drained
        task = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      RunTask(*task);
      absl::MutexLock lock(&mu_);
      busy_ = false;
    }
  }

  absl::Mutex mu_;
  // The worker sleeps on a condition variable, not on a condition of mu_
  // (which would make every unlock of mu_ evaluate it): whoever changes
  // what it waits for signals it.
  absl::CondVar worker_cv_;
  std::deque<std::shared_ptr<Task>> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // an operation runs (worker or caller)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;  // started by the first Submit (under mu_)
};

}  // namespace dist

#endif  // DIST_CPP_ORDERED_EXECUTOR_HPP_

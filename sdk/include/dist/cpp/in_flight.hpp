// dist SDK, C++ side: operations in flight. A transport that only starts an
// operation (posts a send, makes a non-blocking MPI call, enqueues a kernel)
// hands the runtime an InFlight; the executor then moves on to the next
// operation while this one finishes. The runtime (runtime.hpp) keeps them in
// a FlightSet, which:
//   - orders buffers: an operation that shares a buffer with one in flight
//     (one of them writing) starts only after it;
//   - lets whoever waits drive it (InFlight::Drive, one thread at a time);
//   - ends them all at once on revoke.
// Header-only; Abseil only.
#ifndef DIST_CPP_IN_FLIGHT_HPP_
#define DIST_CPP_IN_FLIGHT_HPP_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/backend_plugin.h"
#include "dist/cpp/completion.hpp"
#include "dist/cpp/ordered_executor.hpp"
#include "dist/cpp/validate.hpp"

namespace dist {

// A started operation that finishes without the executor. The transport
// reports the end through the callback it got with the operation
// (Transport::Start); these are how the runtime helps it get there.
class InFlight {
 public:
  virtual ~InFlight() = default;
  // Makes progress until the operation finished (the transport has called
  // its finish callback by then) or `until` passed; returns soon after
  // Transport::Interrupt. `until` in the past: one poll. The runtime lets
  // one thread at a time drive an operation. Backends whose library
  // progresses by itself (a device thread) just wait here.
  virtual void Drive(absl::Time until) = 0;
  // The error for a waiter once the operation's deadline has passed and it
  // still runs (it stays in flight: its buffers are the library's until it
  // ends or the communicator is revoked). OK: the runtime's own message.
  virtual absl::Status Overdue() { return absl::OkStatus(); }
};

// One issued operation: its place in the executor, its completion, and
// once started in flight, its InFlight.
struct FlightTask : OrderedExecutor::Task {
  struct Range {
    uintptr_t begin;
    uintptr_t end;
    bool write;
  };
  dist_collective_t kind = DIST_COLL_BARRIER;
  absl::Time deadline = absl::InfiniteFuture();  // set when it starts
  // The buffers it uses on this rank: two at most but for variable counts
  // (no allocation per operation).
  absl::InlinedVector<Range, 2> ranges;

  absl::Mutex mu;
  std::shared_ptr<InFlight> flight ABSL_GUARDED_BY(mu);  // set once Start handed it over
  bool driven ABSL_GUARDED_BY(mu) = false;               // a thread is in flight->Drive

  // The buffers `kind` uses on `rank` (dist/cpp/validate.hpp's BuffersUsed):
  // send is read, recv written. Variable-count operations (`counts` set)
  // are taken to touch everything.
  void SetRanges(dist_collective_t op_kind, const dist_op_args_t& args, int rank,
                 const dist_op_counts_t* counts) {
    kind = op_kind;
    if (counts != nullptr) {
      ranges.push_back({0, UINTPTR_MAX, true});
      return;
    }
    const UsedBuffers used = BuffersUsed(op_kind, args, rank);
    if (used.send) Add(args.send, false);
    if (used.recv) Add(args.recv, true);
  }
  bool SharesBuffersWith(const FlightTask& other) const {
    for (const Range& a : ranges) {
      for (const Range& b : other.ranges) {
        if ((a.write || b.write) && a.begin < b.end && b.begin < a.end) return true;
      }
    }
    return false;
  }
  std::shared_ptr<InFlight> Flight() {
    absl::MutexLock lock(&mu);
    return flight;
  }

  // Drives the operation until it is done or `until` (see InFlight::Drive);
  // when another thread drives it, sleeps on its completion meanwhile.
  // Returns whether it is done.
  bool DriveUntil(absl::Time until) {
    while (!completion.Done()) {
      std::shared_ptr<InFlight> mine;
      {
        absl::MutexLock lock(&mu);
        if (flight != nullptr && !driven) {
          driven = true;
          mine = flight;
        }
      }
      if (mine != nullptr) {
        mine->Drive(until);
        absl::MutexLock lock(&mu);
        driven = false;
      } else {
        const absl::Duration left = until - absl::Now();
        completion.WaitFor(std::min(left, absl::Milliseconds(1)));
      }
      if (absl::Now() >= until) break;
    }
    return completion.Done();
  }

 private:
  void Add(const dist_buffer_t& buffer, bool write) {
    const size_t bytes = static_cast<size_t>(buffer.count) * dist_dtype_size(buffer.dtype);
    if (buffer.data == nullptr || bytes == 0) return;
    const auto begin = reinterpret_cast<uintptr_t>(buffer.data);
    ranges.push_back({begin, begin + bytes, write});
  }
};

// The operations of one communicator in flight, oldest first. Shared with
// the transport's finish callbacks, which may run after the communicator
// is gone.
class FlightSet {
 public:
  void Add(std::shared_ptr<FlightTask> task) {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
    size_.store(tasks_.size(), std::memory_order_release);
  }

  // Lock-free: whether nothing is in flight. Only an operation's start adds
  // to the set, so a thread that owns the executor's turn can rely on it.
  bool Empty() const { return size_.load(std::memory_order_acquire) == 0; }

  // The transport's finish callback for `task`: done with `status`.
  void Finish(const std::shared_ptr<FlightTask>& task, const absl::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      tasks_.remove(task);
      size_.store(tasks_.size(), std::memory_order_release);
    }
    task->completion.Complete(status);
  }

  // Takes `task` out without completing it (its start failed, or it ran
  // to its end in Start).
  void Remove(const std::shared_ptr<FlightTask>& task) {
    absl::MutexLock lock(&mu_);
    tasks_.remove(task);
    size_.store(tasks_.size(), std::memory_order_release);
  }

  // The oldest operation in flight that shares a buffer with `task`, or
  // that is any operation when `task` is null; nullptr when none.
  std::shared_ptr<FlightTask> FirstSharing(const FlightTask* task) {
    absl::MutexLock lock(&mu_);
    for (const std::shared_ptr<FlightTask>& other : tasks_) {
      if (other->completion.Done()) continue;  // its Finish is on the way
      if (task == nullptr || task->SharesBuffersWith(*other)) return other;
    }
    return nullptr;
  }

  // Ends every operation in flight with `status` (a revoke).
  void FinishAll(const absl::Status& status) {
    std::list<std::shared_ptr<FlightTask>> taken;
    {
      absl::MutexLock lock(&mu_);
      taken.swap(tasks_);
      size_.store(0, std::memory_order_release);
    }
    for (const std::shared_ptr<FlightTask>& task : taken) task->completion.Complete(status);
  }

 private:
  absl::Mutex mu_;
  std::list<std::shared_ptr<FlightTask>> tasks_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> size_{0};  // tasks_.size(), for Empty
};

}  // namespace dist

#endif  // DIST_CPP_IN_FLIGHT_HPP_

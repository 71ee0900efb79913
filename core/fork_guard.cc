#include "core/fork_guard.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace dist {
namespace {

// 0 in the process that loaded dist; a fork() child gets its parent's plus
// one (pthread_atfork), so no process in a chain of forks shares its
// creator's value. getpid() would tell them apart too, but it is a system
// call, and every operation asks (and every work handle records it).
std::atomic<uint64_t> generation{0};
std::atomic<pid_t> current_pid{0};  // getpid(), kept by the same handler

void InChild() {
  generation.store(generation.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  current_pid.store(getpid(), std::memory_order_relaxed);
}

void RegisterOnce() {
  // With the first handle: a fork before any handle exists has nothing to
  // tell apart. glibc drops the handler if libdist is unloaded.
  static std::once_flag once;
  std::call_once(once, [] {
    current_pid.store(getpid(), std::memory_order_relaxed);
    pthread_atfork(nullptr, nullptr, &InChild);
  });
}

}  // namespace

ForkOwner::ForkOwner() {
  RegisterOnce();
  generation_ = generation.load(std::memory_order_relaxed);
  pid_ = current_pid.load(std::memory_order_relaxed);
}

bool ForkOwner::InForkedChild() const {
  return generation.load(std::memory_order_relaxed) != generation_;
}

void LeaveUnfreedInChild(const void* object) {
  static std::mutex mu;
  static auto* kept = new std::vector<const void*>();  // never freed, on purpose
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(object);
}

absl::Status ForkOwner::ChildError(const char* function, const std::string& what) const {
  return absl::FailedPreconditionError(absl::StrCat(
      function, ": ", what, " belongs to process ", pid_, ", and this process (", getpid(),
      ") is a fork() of it: a child cannot use its parent's groups and operations (their "
      "threads, connections and shared memory are the parent's); call dist_init in the child "
      "for a group of its own, or fork before dist_init"));
}

}  // namespace dist

// ThreadSanitizer cannot see Debian's Abseil synchronize: libabsl is built
// without TSan, so absl::Mutex's lock and unlock (atomics and futexes inside
// the uninstrumented .so) establish no happens-before, and every field that
// an absl::Mutex guards would be reported as a race. --config=tsan links this
// shim into every test and tool (--custom_malloc, the only Bazel 4 hook that
// reaches every binary): it interposes on the out-of-line Mutex, CondVar and
// Notification entry points, calls the real ones (dlsym RTLD_NEXT) and tells
// TSan what they do: release before letting go of the mutex, acquire after
// taking it. Conditions that absl evaluates while it holds the mutex
// internally are wrapped so that they acquire first.
//
// Only for TSan builds against Debian 12's Abseil (inline namespace
// "debian3"); a missing symbol aborts at once with its name rather than
// silently checking nothing.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void* Real(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_shim: %s not found in Abseil: %s\n", name, dlerror());
    std::abort();
  }
  return fn;
}

// absl::Condition's layout in this Abseil (mutex.h): the evaluator comes
// first; a Condition is evaluated as eval_(this).
struct ConditionLayout {
  bool (*eval)(const ConditionLayout*);
  bool (*function)(void*);
  struct {
    void* ptr;
    std::ptrdiff_t adj;
  } method;
  void* arg;
};

// A Condition that evaluates `original` as a critical section of `mu` for TSan.
struct Wrapped {
  ConditionLayout self;
  const ConditionLayout* original;
  void* mu;
};

// Absl evaluates a condition while it holds the mutex internally (in the
// waiter, or in whichever thread is letting go of the mutex), and lets go
// again without passing through Unlock when the condition is false: the
// evaluation is a critical section of its own, so it acquires before and
// releases after, or its reads would race with the next holder's writes.
//
// The wrapper lives on the waiter's stack, and absl hands its address to
// whichever thread lets go of the mutex through its own (uninstrumented)
// queue: the waiter releases on the wrapper's address after filling it in,
// and the evaluation acquires there before reading it, or TSan reports the
// read of the wrapper as a race with its writing (seen in survival_test,
// two threads waiting on one Notification with timeouts).
bool EvalWrapped(const ConditionLayout* c) {
  __tsan_acquire(const_cast<ConditionLayout*>(c));
  const Wrapped* w = reinterpret_cast<const Wrapped*>(c);
  __tsan_acquire(w->mu);
  const bool result =
      w->original == nullptr || w->original->eval == nullptr || w->original->eval(w->original);
  __tsan_release(w->mu);
  return result;
}

// Absl skips waiters whose conditions it deems equal to one it just found
// false (Condition::GuaranteedEqual compares every field but eval's target
// only through eval_, function_, method_ and arg_). Every wrapper has the same
// eval_, so the original's other fields are copied: two wrappers are equal
// exactly when their originals are. Wrappers with empty fields would all be
// "equal", and a waiter queued behind another one whose condition is false
// would not be woken until its timeout.
Wrapped Wrap(void* mu, const void* cond) {
  Wrapped w{};
  w.original = static_cast<const ConditionLayout*>(cond);
  if (w.original != nullptr) w.self = *w.original;
  w.self.eval = &EvalWrapped;
  w.mu = mu;
  return w;
}

// Durations and Times are passed as {int64 rep_hi, uint32 rep_lo} by value.
struct Duration {
  int64_t hi;
  uint32_t lo;
};
struct Time {
  Duration d;
};

}  // namespace

#define SHIM(ret, label, params) extern "C" ret label params __asm__(#label)
#define REAL(type, label) static const auto real = reinterpret_cast<type>(Real(#label))

// --- Mutex: taking it ---
SHIM(void, _ZN4absl7debian35Mutex4LockEv, (void* mu));
void _ZN4absl7debian35Mutex4LockEv(void* mu) {
  REAL(void (*)(void*), _ZN4absl7debian35Mutex4LockEv);
  real(mu);
  __tsan_acquire(mu);
}
SHIM(void, _ZN4absl7debian35Mutex10ReaderLockEv, (void* mu));
void _ZN4absl7debian35Mutex10ReaderLockEv(void* mu) {
  REAL(void (*)(void*), _ZN4absl7debian35Mutex10ReaderLockEv);
  real(mu);
  __tsan_acquire(mu);
}
SHIM(bool, _ZN4absl7debian35Mutex7TryLockEv, (void* mu));
bool _ZN4absl7debian35Mutex7TryLockEv(void* mu) {
  REAL(bool (*)(void*), _ZN4absl7debian35Mutex7TryLockEv);
  const bool taken = real(mu);
  if (taken) __tsan_acquire(mu);
  return taken;
}
SHIM(bool, _ZN4absl7debian35Mutex13ReaderTryLockEv, (void* mu));
bool _ZN4absl7debian35Mutex13ReaderTryLockEv(void* mu) {
  REAL(bool (*)(void*), _ZN4absl7debian35Mutex13ReaderTryLockEv);
  const bool taken = real(mu);
  if (taken) __tsan_acquire(mu);
  return taken;
}
SHIM(void, _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE, (void* mu, const void* cond));
void _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE(void* mu, const void* cond) {
  REAL(void (*)(void*, const void*), _ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE);
  Wrapped w = Wrap(mu, cond);
  __tsan_release(&w);  // handed to other threads inside Abseil: see EvalWrapped
  real(mu, &w);
  __tsan_acquire(mu);
}
SHIM(void, _ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE, (void* mu, const void* cond));
void _ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE(void* mu, const void* cond) {
  REAL(void (*)(void*, const void*), _ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE);
  Wrapped w = Wrap(mu, cond);
  __tsan_release(&w);  // handed to other threads inside Abseil: see EvalWrapped
  real(mu, &w);
  __tsan_acquire(mu);
}
SHIM(bool, _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE,
     (void* mu, const void* cond, Duration d));
bool _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE(void* mu,
                                                                                 const void* cond,
                                                                                 Duration d) {
  REAL(bool (*)(void*, const void*, Duration),
       _ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE);
  Wrapped w = Wrap(mu, cond);
  __tsan_release(&w);  // handed to other threads inside Abseil: see EvalWrapped
  const bool result = real(mu, &w, d);
  __tsan_acquire(mu);  // held either way
  return result;
}
SHIM(bool, _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE,
     (void* mu, const void* cond, Time t));
bool _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE(void* mu,
                                                                              const void* cond,
                                                                              Time t) {
  REAL(bool (*)(void*, const void*, Time),
       _ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE);
  Wrapped w = Wrap(mu, cond);
  __tsan_release(&w);  // handed to other threads inside Abseil: see EvalWrapped
  const bool result = real(mu, &w, t);
  __tsan_acquire(mu);
  return result;
}

// --- Mutex: letting go ---
SHIM(void, _ZN4absl7debian35Mutex6UnlockEv, (void* mu));
void _ZN4absl7debian35Mutex6UnlockEv(void* mu) {
  REAL(void (*)(void*), _ZN4absl7debian35Mutex6UnlockEv);
  __tsan_release(mu);
  real(mu);
}
SHIM(void, _ZN4absl7debian35Mutex12ReaderUnlockEv, (void* mu));
void _ZN4absl7debian35Mutex12ReaderUnlockEv(void* mu) {
  REAL(void (*)(void*), _ZN4absl7debian35Mutex12ReaderUnlockEv);
  __tsan_release(mu);
  real(mu);
}

// --- Mutex: waiting (lets go, takes it again) ---
SHIM(void, _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE, (void* mu, const void* cond));
void _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE(void* mu, const void* cond) {
  REAL(void (*)(void*, const void*), _ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE);
  Wrapped w = Wrap(mu, cond);
  __tsan_release(&w);  // handed to other threads inside Abseil: see EvalWrapped
  __tsan_release(mu);
  real(mu, &w);
  __tsan_acquire(mu);
}
SHIM(bool, _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE,
     (void* mu, const void* cond, Duration d));
bool _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE(void* mu,
                                                                              const void* cond,
                                                                              Duration d) {
  REAL(bool (*)(void*, const void*, Duration),
       _ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE);
  Wrapped w = Wrap(mu, cond);
  __tsan_release(&w);  // handed to other threads inside Abseil: see EvalWrapped
  __tsan_release(mu);
  const bool result = real(mu, &w, d);
  __tsan_acquire(mu);
  return result;
}
SHIM(bool, _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE,
     (void* mu, const void* cond, Time t));
bool _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE(void* mu,
                                                                           const void* cond,
                                                                           Time t) {
  REAL(bool (*)(void*, const void*, Time),
       _ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE);
  Wrapped w = Wrap(mu, cond);
  __tsan_release(&w);  // handed to other threads inside Abseil: see EvalWrapped
  __tsan_release(mu);
  const bool result = real(mu, &w, t);
  __tsan_acquire(mu);
  return result;
}

// --- CondVar ---
SHIM(void, _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE, (void* cv, void* mu));
void _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE(void* cv, void* mu) {
  REAL(void (*)(void*, void*), _ZN4absl7debian37CondVar4WaitEPNS0_5MutexE);
  __tsan_release(mu);
  real(cv, mu);
  __tsan_acquire(mu);
}
SHIM(bool, _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE,
     (void* cv, void* mu, Duration d));
bool _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE(void* cv, void* mu,
                                                                          Duration d) {
  REAL(bool (*)(void*, void*, Duration),
       _ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE);
  __tsan_release(mu);
  const bool result = real(cv, mu, d);
  __tsan_acquire(mu);
  return result;
}
SHIM(bool, _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE,
     (void* cv, void* mu, Time t));
bool _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE(void* cv, void* mu, Time t) {
  REAL(bool (*)(void*, void*, Time),
       _ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE);
  __tsan_release(mu);
  const bool result = real(cv, mu, t);
  __tsan_acquire(mu);
  return result;
}

// --- Notification: what Notify published, WaitForNotification sees ---
SHIM(void, _ZN4absl7debian312Notification6NotifyEv, (void* n));
void _ZN4absl7debian312Notification6NotifyEv(void* n) {
  REAL(void (*)(void*), _ZN4absl7debian312Notification6NotifyEv);
  __tsan_release(n);
  real(n);
}

// The suppressions for third-party code are in tsan.supp next to this file:
// a __tsan_default_suppressions here would never be consulted, since
// libtsan's own weak definition comes first in the symbol lookup order.

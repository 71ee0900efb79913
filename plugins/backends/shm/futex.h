// Futex wait/wake on a word in shared memory (not FUTEX_PRIVATE: the word is
// shared between processes). Waits always carry a timeout.
#ifndef DIST_PLUGINS_BACKENDS_SHM_FUTEX_H_
#define DIST_PLUGINS_BACKENDS_SHM_FUTEX_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace dist_shm {

// Sleeps while *word == expected, at most `timeout`. Spurious returns are
// fine: callers re-check their condition.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout);

// Wakes every sleeper on *word.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_FUTEX_H_

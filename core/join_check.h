// The join check every rendezvous ends with, whatever plugin produced the
// store: world sizes agree, no two processes claim one rank, and everybody
// arrives within the timeout; otherwise every rank learns who is at fault.
#ifndef DIST_CORE_JOIN_CHECK_H_
#define DIST_CORE_JOIN_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dist/store.h"

namespace dist {

// `url` is only for messages. Keys live under "dist/join/" of `store`.
absl::Status RunJoinCheck(const dist_store_t* store, int rank, int world_size,
                          const std::string& url, absl::Duration timeout);

}  // namespace dist

#endif  // DIST_CORE_JOIN_CHECK_H_

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

// `url` and `timeout` are for messages; the check gives up at `deadline`
// (the rendezvous's, so that resolve and join together stay within the
// timeout). Keys live under "dist/join/" of `store`.
absl::Status RunJoinCheck(const dist_store_t* store, int rank, int world_size,
                          const std::string& url, absl::Duration timeout, absl::Time deadline);

// "host:pid": how errors and the store's records name this process.
std::string ProcessIdentity();

}  // namespace dist

#endif  // DIST_CORE_JOIN_CHECK_H_

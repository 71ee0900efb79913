// Turning a Gloo exception into an error that says what happened and which
// rank is to blame. Gloo's messages name a peer only by socket address
// ("Connection closed by peer [127.0.0.1]:41234"); the communicator knows
// every pair's peer address and maps it back to a rank. A timeout names no
// one, so the ranks that fail compare notes through the store: the first
// failure in the group is kept, and ranks that never report one within a
// short grace period are named as not responding.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_FAILURE_H_
#define DIST_PLUGINS_BACKENDS_GLOO_FAILURE_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"

namespace dist_gloo {

struct GlooFailure {
  absl::StatusCode code = absl::StatusCode::kUnavailable;
  std::string what;  // Gloo's message without its "[file.cc:123] " prefix
  int peer = -1;     // the rank whose connection failed, -1 if unknown
  bool timed_out = false;
  // A message arrived for an operation this rank is not running.
  bool mismatched = false;
  std::string Describe() const;  // one phrase: "lost the connection to rank 2 (...)"
};

// `peer_addresses[r]` is rank r's address as Gloo prints it ("" for self).
GlooFailure ClassifyGlooError(const std::string& what,
                              const std::vector<std::string>& peer_addresses);

// Compares notes with the other ranks through `store` (best effort: store
// errors are ignored; waits at most `grace`). Returns the text to append
// to this rank's error, e.g. "; first failure in the group: rank 0: lost
// the connection to rank 2" or "; ranks that reported no failure within
// 500ms: 3 (dead, stuck, or not calling this operation)". The wait for a
// lost peer's report ends early once `cancelled` says so (the communicator
// was aborted meanwhile, e.g. by a revoke: then nobody waits for the note).
std::string CompareNotes(const dist::StoreView& store, int rank, int size,
                         const GlooFailure& failure, const std::string& report,
                         absl::Duration grace, const std::function<bool()>& cancelled);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_FAILURE_H_

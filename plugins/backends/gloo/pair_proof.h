// Proving, over every pair of a freshly connected Gloo context, that the
// process at the other end belongs to this job.
//
// Why: in Gloo 0.5 each pair listens on a port of its own (published in the
// store) and accepts the first connection that reaches it; nothing on the
// wire says who is calling. A program that reaches the port before the real
// peer takes its place. So each end sends the other a proof that it knows
// the mesh's secret, a random value rank 0 put in the store (which only
// the job's ranks can read when the store has a token), before the
// communicator carries any data. Only the accepting end can be fooled (the
// connecting end dialled the address its peer published in the store), so
// the connecting end sends the proof and the accepting end checks it: one
// message a pair. A proof is HMAC-SHA256(secret, "dist-gloo-pair" || from
// || to), good for that pair and direction only.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_PAIR_PROOF_H_
#define DIST_PLUGINS_BACKENDS_GLOO_PAIR_PROOF_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gloo/context.h"

namespace dist_gloo {

// Over every pair of `context` (connected, asynchronous pairs): sends the
// proof where this rank's end made the connection (`connects[peer]`), and
// checks the peer's against `secret` where it accepted it, within
// `timeout`. An error names the peers whose proof was wrong
// (PERMISSION_DENIED) or never came (DEADLINE_EXCEEDED); `hint` ends it.
absl::Status ProvePairs(gloo::Context& context, const std::vector<bool>& connects,
                        absl::string_view secret, absl::Duration timeout, absl::string_view hint);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_PAIR_PROOF_H_

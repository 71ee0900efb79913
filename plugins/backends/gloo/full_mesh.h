// Connecting every pair of a Gloo context, in place of Gloo 0.5's
// rendezvous::Context::connectFullMesh, for start-up time.
//
// Gloo's version goes through the peers one at a time: wait for peer i's
// address (a store round trip), get it (another), connect the pair and
// block until that peer has reached the same pair in its own loop. The
// waits chain across ranks, so on a loaded host start-up grew with the
// world size times a scheduling delay (README.md, "Start-up"). Here each
// rank publishes its addresses (one key, as Gloo does), fetches each peer's
// with one get (the store's get waits for the key), and connects every pair
// on its own thread as soon as the address is in, so no pair waits for
// another.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_FULL_MESH_H_
#define DIST_PLUGINS_BACKENDS_GLOO_FULL_MESH_H_

#include <chrono>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dist/cpp/store.hpp"
#include "gloo/context.h"
#include "gloo/transport/device.h"

namespace dist_gloo {

struct MeshOptions {
  // Each rank's addresses go under key_prefix + its rank.
  absl::string_view key_prefix;
  // What to check when a rank never publishes its address.
  absl::string_view hint = "check that every rank creates this communicator";
  // Polled while waiting for the other ranks; true stops the wait with
  // ABORTED. Null: wait up to the timeout.
  std::function<bool()> cancelled;
};

// Connects all pairs of `context` (rank and size set, not yet connected)
// over `device`, meeting through `store` within `timeout`; the connections
// keep the context's timeout. Errors name the ranks that never published
// their address or could not be connected.
absl::Status ConnectFullMesh(gloo::Context& context, const dist::StoreView& store,
                             const std::shared_ptr<gloo::transport::Device>& device,
                             absl::Duration timeout, const MeshOptions& options = {});

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_FULL_MESH_H_

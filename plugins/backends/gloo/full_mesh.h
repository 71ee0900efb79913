// Connecting every pair of a Gloo context, in place of Gloo 0.5's
// rendezvous::Context::connectFullMesh, for start-up time.
//
// Gloo's version goes through the peers one at a time: wait for peer i's
// address (a store round trip), get it (another), connect the pair and
// block until that peer has reached the same pair in its own loop. The
// waits chain across ranks, so on a loaded host start-up grew with the
// world size times a scheduling delay (README.md, "Start-up"). Here each
// rank publishes its addresses (one key, as Gloo does) and fetches each
// peer's with one get (the store's get waits for the key). Of each pair,
// Gloo makes one end connect and the other accept; this rank hands the
// connects it makes to a few threads as the addresses come in, and waits
// for the peers' connects only after that, so no rank ever waits on
// another's wait.
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
#include "plugins/backends/gloo/loop_kicker.h"

namespace dist_gloo {

struct MeshOptions {
  // Each rank's addresses go under key_prefix + its rank.
  absl::string_view key_prefix;
  // What to check when a rank never publishes its address.
  absl::string_view hint = "check that every rank creates this communicator";
  // Polled (every 50 ms) while waiting for the other ranks' addresses and
  // connects; true stops the wait with ABORTED. Null: wait up to the
  // timeout.
  std::function<bool()> cancelled;
  // The device's kicker (loop_kicker.h), kicked while a failure closes
  // the pairs; null: closing waits for the device thread as Gloo does.
  LoopKicker* kicker = nullptr;
};

// Connects all pairs of `context` (rank and size set, not yet connected)
// over `device`, meeting through `store` within `timeout`; the connections
// keep the context's timeout. An error names the rank that never published
// its address or could not be connected (the first failure; it fails every
// other pair at once, so no connect waits out its timeout after it).
absl::Status ConnectFullMesh(gloo::Context& context, const dist::StoreView& store,
                             const std::shared_ptr<gloo::transport::Device>& device,
                             absl::Duration timeout, const MeshOptions& options = {});

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_FULL_MESH_H_

// Barrier by all-to-all of empty messages: dist's own class in the shape
// of Gloo's legacy ones (bound buffers, built once, run many times), for
// the synchronous pairs only.
//
// Every rank sends an empty message to every other, then waits for one
// from each: one message latency, W - 1 messages a rank. Gloo's
// BarrierAllToAll does the same with 4-byte messages (empty_messages.h says
// why empty ones are cheaper). The wait polls the peer's socket before it
// sleeps where the ranks fit the CPUs (peer_spin.h).
//
// Why no notifications: as in BarrierDissemination, on the synchronous
// pairs a message is read only when its receiver waits for it, in the
// order it was sent, and each direction of a pair carries one message a
// run. A rank that has left run n and entered run n+1 leaves its message
// in the socket until its peer waits for it in run n+1.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BARRIER_ALL_TO_ALL_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BARRIER_ALL_TO_ALL_H_

#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "plugins/backends/gloo/empty_messages.h"
#include "plugins/backends/gloo/peer_spin.h"

namespace dist_gloo {

class BarrierAllToAll : public gloo::Algorithm {
 public:
  // `spin` (borrowed, may be null) polls a peer's socket before each wait.
  BarrierAllToAll(const std::shared_ptr<gloo::Context>& context, PeerSpin* spin = nullptr)
      : gloo::Algorithm(context), spin_(spin) {
    if (contextSize_ == 1) return;  // nothing to wait for (nor a slot to take)
    const int slot = context_->nextSlot();
    // Peers in the order after this rank (rank + 1, rank + 2, ...), so that
    // not every rank writes to rank 0 first.
    for (int offset = 1; offset < contextSize_; ++offset) {
      const int peer = (contextRank_ + offset) % contextSize_;
      peers_.push_back(std::make_unique<EmptyMessages>(*context_, slot, peer, peer));
    }
  }

  void run() override {
    for (auto& peer : peers_) peer->Send();
    for (auto& peer : peers_) peer->WaitFor(spin_);
    for (auto& peer : peers_) peer->WaitSent();
  }

 private:
  PeerSpin* const spin_;
  std::vector<std::unique_ptr<EmptyMessages>> peers_;  // every other rank, both ways
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BARRIER_ALL_TO_ALL_H_

// Barrier through one rank, with empty messages: dist's own class in the
// shape of Gloo's legacy ones (bound buffers, built once, run many times),
// for the synchronous pairs only.
//
// Every other rank sends an empty message to the root and waits for one
// back; the root waits for all of them, then answers each: two message
// latencies, 2 (W - 1) messages in all. Gloo's BarrierAllToOne does the
// same with 4-byte messages (empty_messages.h says why empty ones are
// cheaper). The waits poll the peer's socket before they sleep where the
// ranks fit the CPUs (peer_spin.h).
//
// Why no notifications: as in BarrierDissemination, on the synchronous
// pairs a message is read only when its receiver waits for it, in the
// order it was sent, and each direction of a pair carries one message a
// run.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BARRIER_ALL_TO_ONE_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BARRIER_ALL_TO_ONE_H_

#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "plugins/backends/gloo/empty_messages.h"
#include "plugins/backends/gloo/peer_spin.h"

namespace dist_gloo {

class BarrierAllToOne : public gloo::Algorithm {
 public:
  // `spin` (borrowed, may be null) polls a peer's socket before each wait.
  BarrierAllToOne(const std::shared_ptr<gloo::Context>& context, int root, PeerSpin* spin = nullptr)
      : gloo::Algorithm(context), root_(root), spin_(spin) {
    if (contextSize_ == 1) return;  // nothing to wait for (nor a slot to take)
    const int slot = context_->nextSlot();
    for (int rank = 0; rank < contextSize_; ++rank) {
      if (rank == contextRank_ || (contextRank_ != root_ && rank != root_)) continue;
      peers_.push_back(std::make_unique<EmptyMessages>(*context_, slot, rank, rank));
    }
  }

  void run() override {
    if (contextRank_ == root_) {
      for (auto& peer : peers_) peer->WaitFor(spin_);
      for (auto& peer : peers_) peer->Send();
      for (auto& peer : peers_) peer->WaitSent();
      return;
    }
    for (auto& root : peers_) {  // the root alone
      root->Send();
      root->WaitFor(spin_);
      root->WaitSent();
    }
  }

 private:
  const int root_;
  PeerSpin* const spin_;
  // The root's: every other rank; everyone else's: the root alone.
  std::vector<std::unique_ptr<EmptyMessages>> peers_;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BARRIER_ALL_TO_ONE_H_

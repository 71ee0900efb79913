// Barrier by dissemination, dist's own class in the shape of Gloo's legacy
// ones (bound buffers, built once, run many times), for the synchronous
// pairs only.
//
// Step k sends an empty message to rank + 2^k and waits for one from
// rank - 2^k (mod W): ceil(log2(W)) messages in turn, one on two ranks,
// where it is the exchange BarrierAllToAll makes. What it adds to Gloo's
// classes is the wait: it polls the peer's socket before it sleeps
// (peer_spin.h). Empty messages (empty_messages.h): a receiver reads the
// header alone, one read a message (a 4-byte all_reduce, which this
// replaced on two ranks, reads twice).
//
// Why no notifications: as in AllreduceRecursiveDoubling, on the
// synchronous pairs a message is read only when its receiver waits for it,
// in the order it was sent, and each direction of a pair carries at most
// one message a run (the steps' offsets 2^k < W are distinct). A rank that
// has left run n and entered run n+1 leaves its message in the socket until
// its peer waits for it in run n+1.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BARRIER_DISSEMINATION_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BARRIER_DISSEMINATION_H_

#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "plugins/backends/gloo/empty_messages.h"
#include "plugins/backends/gloo/peer_spin.h"

namespace dist_gloo {

class BarrierDissemination : public gloo::Algorithm {
 public:
  // `spin` (borrowed, may be null) polls a peer's socket before each wait.
  BarrierDissemination(const std::shared_ptr<gloo::Context>& context, PeerSpin* spin = nullptr)
      : gloo::Algorithm(context), spin_(spin) {
    int steps = 0;
    while ((1 << steps) < contextSize_) ++steps;
    if (steps == 0) return;  // one rank: nothing to wait for (nor slots to take)
    // The same slot numbers on every rank, one a step.
    const int base = context_->nextSlot(steps);
    for (int step = 0; step < steps; ++step) {
      const int offset = 1 << step;
      steps_.push_back(std::make_unique<EmptyMessages>(
          *context_, base + step, (contextRank_ + offset) % contextSize_,
          (contextRank_ - offset + contextSize_) % contextSize_));
    }
  }

  void run() override {
    for (auto& step : steps_) {
      step->Send();
      step->WaitFor(spin_);
      step->WaitSent();
    }
  }

 private:
  PeerSpin* const spin_;
  // Step k: to rank + 2^k, from rank - 2^k.
  std::vector<std::unique_ptr<EmptyMessages>> steps_;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BARRIER_DISSEMINATION_H_

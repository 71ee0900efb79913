// Broadcast as the root's writes straight into every other rank's buffer,
// with no clear-to-send: dist's own class in the shape of Gloo's legacy
// ones (bound buffers, built once, run many times), for the synchronous
// pairs only.
//
// Why: Gloo's BroadcastOneToAll has every receiver send a clear-to-send
// and the root wait for it before each write, so that a write cannot land
// in a buffer still being read: two message latencies a call. On the
// synchronous pairs a message is read from the socket only when its
// receiver waits for it, in the order it was sent (the reason
// AllreduceRecursiveDoubling needs no notifications either), so the root's
// next write waits in the socket until the receiver's next run and the
// clear-to-send buys nothing: one latency. A root may run many
// broadcasts ahead of a receiver; its writes then wait for the kernel's
// room, which the receiver frees as it reads them in order, and it
// cannot be waiting to write to the root meanwhile (every operation that
// needs its messages stops the root too).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BROADCAST_DIRECT_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BROADCAST_DIRECT_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"

namespace dist_gloo {

class BroadcastDirect : public gloo::Algorithm {
 public:
  // Broadcasts `bytes` at `data` (borrowed; it outlives this object) from
  // `root` on every run.
  BroadcastDirect(const std::shared_ptr<gloo::Context>& context, void* data, size_t bytes, int root)
      : gloo::Algorithm(context), root_(root) {
    if (contextSize_ == 1 || bytes == 0) return;
    const int slot = context_->nextSlot();
    if (contextRank_ != root_) {
      recv_ = getPair(root_)->createRecvBuffer(slot, data, bytes);
      return;
    }
    for (int peer = 0; peer < contextSize_; ++peer) {
      if (peer == root_) continue;
      sends_.push_back(getPair(peer)->createSendBuffer(slot, data, bytes));
    }
  }

  void run() override {
    if (recv_ != nullptr) {
      recv_->waitRecv();
      return;
    }
    for (auto& send : sends_) send->send();
    // The caller may change the data once this returns.
    for (auto& send : sends_) send->waitSend();
  }

 private:
  const int root_;
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends_;  // the root's, one a peer
  std::unique_ptr<gloo::transport::Buffer> recv_;                // everyone else's
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BROADCAST_DIRECT_H_

// All_gather as every rank's writes of its block straight into every other
// rank's result buffer, with no notifications: dist's own class in the
// shape of Gloo's legacy ones (bound buffers, built once, run many times),
// for the synchronous pairs only.
//
// Why: Gloo's AllgatherRing passes the blocks around the ring in W-1
// rounds and waits for a notification round trip in each, so that a write
// cannot land in a block still being read: 2(W-1) message latencies a
// call. On the synchronous pairs a message is read from the socket only
// when its receiver waits for it, in the order it was sent (the reason
// AllreduceRecursiveDoubling needs no notifications either), so a peer's
// write of the next run waits in the socket until this rank's next run:
// one latency, and the W-1 messages of a rank travel at once. A rank can
// be at most one run ahead of any peer (it needs the peer's block of the
// run it is in), so a link holds at most two of its messages, which is
// what the synchronous pairs' message limit allows for (sync_limit.h).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_ALLGATHER_DIRECT_H_
#define DIST_PLUGINS_BACKENDS_GLOO_ALLGATHER_DIRECT_H_

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"

namespace dist_gloo {

class AllgatherDirect : public gloo::Algorithm {
 public:
  // Gathers `block` bytes at `in` from every rank into `out` (W blocks in
  // rank order) on every run; both borrowed, they outlive this object.
  AllgatherDirect(const std::shared_ptr<gloo::Context>& context, const void* in, void* out,
                  size_t block)
      : gloo::Algorithm(context),
        in_(in),
        own_(static_cast<char*>(out) + block * static_cast<size_t>(contextRank_)),
        block_(block) {
    if (contextSize_ == 1 || block_ == 0) return;
    const int slot = context_->nextSlot();
    char* const base = static_cast<char*>(out);
    for (int peer = 0; peer < contextSize_; ++peer) {
      if (peer == contextRank_) continue;
      auto& pair = getPair(peer);
      // Each send reads this rank's block in place in `out`: a buffer
      // sends from the memory it was registered with.
      sends_.push_back(pair->createSendBuffer(slot, own_, block_));
      recvs_.push_back(
          pair->createRecvBuffer(slot, base + block_ * static_cast<size_t>(peer), block_));
    }
  }

  void run() override {
    if (block_ == 0) return;
    std::memcpy(own_, in_, block_);
    for (auto& send : sends_) send->send();
    for (auto& recv : recvs_) recv->waitRecv();
    for (auto& send : sends_) send->waitSend();
  }

 private:
  const void* const in_;
  char* const own_;  // this rank's block in the result
  const size_t block_;
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends_;  // one a peer
  std::vector<std::unique_ptr<gloo::transport::Buffer>> recvs_;  // one a peer
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_ALLGATHER_DIRECT_H_

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
//
// No copies: each run points the buffers at the caller's memory first
// (buffer_memory.h).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_ALLGATHER_DIRECT_H_
#define DIST_PLUGINS_BACKENDS_GLOO_ALLGATHER_DIRECT_H_

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"
#include "plugins/backends/gloo/buffer_memory.h"
#include "plugins/backends/gloo/peer_spin.h"

namespace dist_gloo {

class AllgatherDirect : public gloo::Algorithm {
 public:
  // Gathers `block` bytes from every rank on every Run; `scratch_in` and
  // `scratch_out` (borrowed, they outlive this object; `block` and W
  // blocks long) are what run() uses. `spin` (borrowed, may be null) polls
  // a peer's socket before each wait (peer_spin.h).
  AllgatherDirect(const std::shared_ptr<gloo::Context>& context, void* scratch_in,
                  void* scratch_out, size_t block, PeerSpin* spin = nullptr)
      : gloo::Algorithm(context),
        scratch_in_(scratch_in),
        scratch_out_(scratch_out),
        block_(block),
        spin_(spin) {
    if (contextSize_ == 1 || block_ == 0) return;
    const int slot = context_->nextSlot();
    for (int peer = 0; peer < contextSize_; ++peer) {
      if (peer == contextRank_) continue;
      auto& pair = getPair(peer);
      sends_.push_back(pair->createSendBuffer(slot, scratch_in, block_));
      recvs_.push_back(pair->createRecvBuffer(slot, Block(scratch_out, peer), block_));
      peers_.push_back(peer);
    }
  }

  // One all_gather of `send` (`block` bytes) into `recv` (W blocks in rank
  // order); `send` may be this rank's block of `recv`.
  void Run(const void* send, void* recv) {
    if (block_ == 0) return;
    char* own = Block(recv, contextRank_);
    if (own != send) std::memcpy(own, send, block_);
    LentMemory lent;
    size_t i = 0;
    for (int peer = 0; peer < contextSize_; ++peer) {
      if (peer == contextRank_) continue;
      lent.Lend(*sends_[i], scratch_in_, const_cast<void*>(send));
      lent.Lend(*recvs_[i], Block(scratch_out_, peer), Block(recv, peer));
      ++i;
    }
    for (auto& one : sends_) one->send();
    for (size_t k = 0; k < recvs_.size(); ++k) {
      ReceiveFrom(spin_, peers_[k], block_, *getPair(peers_[k]), *recvs_[k]);
    }
    for (auto& one : sends_) one->waitSend();
  }

  void run() override { Run(scratch_in_, scratch_out_); }

 private:
  char* Block(void* out, int rank) const {
    return static_cast<char*>(out) + block_ * static_cast<size_t>(rank);
  }

  void* const scratch_in_;
  void* const scratch_out_;
  const size_t block_;
  PeerSpin* const spin_;
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends_;  // one a peer
  std::vector<std::unique_ptr<gloo::transport::Buffer>> recvs_;  // one a peer
  std::vector<int> peers_;                                       // recvs_[k] is from peers_[k]
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_ALLGATHER_DIRECT_H_

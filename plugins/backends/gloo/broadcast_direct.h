// Broadcast as the root's writes straight from the caller's buffer into
// every other rank's caller's buffer: dist's own class in the shape of
// Gloo's legacy ones (bound buffers, built once, run many times), for the
// synchronous pairs only.
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
// needs its messages stops the root too). Above some size those unpaced
// writes lose (bound_algorithms.cc): `paced` then keeps Gloo's
// clear-to-send.
//
// Why no copies: Gloo's classes send from and receive into the memory
// their buffers were made with, so a cached instance costs a copy in at
// the root and a copy out at every receiver: at 128-512 KiB the plugin
// took 1.03-1.33x the same class used raw with them, 0.90-1.24x without
// (README.md, "Algorithm choice"). On the synchronous
// pairs Gloo touches a buffer's memory only inside send() (a blocking
// write) and waitRecv() (the read), so each run points the buffers at the
// caller's memory first (buffer_memory.h).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_BROADCAST_DIRECT_H_
#define DIST_PLUGINS_BACKENDS_GLOO_BROADCAST_DIRECT_H_

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

class BroadcastDirect : public gloo::Algorithm {
 public:
  // Broadcasts `bytes` from `root` on every Run; `scratch` (borrowed, it
  // outlives this object, `bytes` long) is what run() uses.
  // `spin` (borrowed, may be null) polls a peer's socket before each wait
  // (peer_spin.h).
  BroadcastDirect(const std::shared_ptr<gloo::Context>& context, void* scratch, size_t bytes,
                  int root, bool paced, PeerSpin* spin = nullptr)
      : gloo::Algorithm(context),
        scratch_(scratch),
        bytes_(bytes),
        root_(root),
        paced_(paced),
        spin_(spin) {
    if (contextSize_ == 1 || bytes == 0) return;
    const int slot = context_->nextSlot(2);
    const int clear_slot = slot + 1;
    if (contextRank_ != root_) {
      auto& pair = getPair(root_);
      recv_ = pair->createRecvBuffer(slot, scratch, bytes);
      if (paced_) clear_send_ = pair->createSendBuffer(clear_slot, &token_, sizeof(token_));
      return;
    }
    clear_tokens_.resize(static_cast<size_t>(contextSize_));
    for (int peer = 0; peer < contextSize_; ++peer) {
      if (peer == root_) continue;
      auto& pair = getPair(peer);
      sends_.push_back(pair->createSendBuffer(slot, scratch, bytes));
      peers_.push_back(peer);
      if (paced_) {
        clear_recvs_.push_back(
            pair->createRecvBuffer(clear_slot, &clear_tokens_[peer], sizeof(int)));
      }
    }
  }

  // One broadcast of the root's `send` into every other rank's `recv`
  // (each `bytes` long; the root's `recv` is not touched).
  void Run(const void* send, void* recv) {
    LentMemory lent;
    if (recv_ != nullptr) {
      lent.Lend(*recv_, scratch_, recv);
      if (clear_send_ != nullptr) clear_send_->send();
      ReceiveFrom(spin_, root_, bytes_, *getPair(root_), *recv_);
      if (clear_send_ != nullptr) clear_send_->waitSend();
      return;
    }
    for (size_t i = 0; i < sends_.size(); ++i) {
      lent.Lend(*sends_[i], scratch_, const_cast<void*>(send));
      if (paced_) {
        ReceiveFrom(spin_, peers_[i], sizeof(int), *getPair(peers_[i]), *clear_recvs_[i]);
      }
      sends_[i]->send();
    }
    // The caller may change the data once this returns.
    for (auto& one : sends_) one->waitSend();
  }

  void run() override { Run(scratch_, scratch_); }

 private:
  void* const scratch_;
  const size_t bytes_;
  const int root_;
  const bool paced_;
  PeerSpin* const spin_;
  std::vector<int> peers_;  // the root's: sends_[i] goes to peers_[i]
  int token_ = 0;
  std::vector<int> clear_tokens_;
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends_;        // the root's, one a peer
  std::vector<std::unique_ptr<gloo::transport::Buffer>> clear_recvs_;  // the root's, if paced
  std::unique_ptr<gloo::transport::Buffer> recv_;                      // everyone else's
  std::unique_ptr<gloo::transport::Buffer> clear_send_;                // theirs, if paced
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_BROADCAST_DIRECT_H_

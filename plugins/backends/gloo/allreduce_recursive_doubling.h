// All_reduce by recursive doubling, dist's own algorithm in the shape of
// Gloo's legacy classes (bound buffers, built once, run many times), for
// small messages on the synchronous pairs.
//
// Why: a small all_reduce costs message latencies, not bandwidth, and none
// of Gloo 0.5's algorithms takes the fewest. Per call, AllreduceRing
// waits for 2(W-1) messages in turn (each round's data, then a
// notification round trip before the next), AllreduceHalvingDoubling and
// AllreduceBcube for 2 log2(W) (a reduce-scatter, then an all-gather).
// Here step k exchanges the whole partial result with rank ^ 2^k and
// reduces it: log2(W) messages in turn, one on two ranks. It sends the
// whole buffer at every step (log2(W) buffers a rank, against about two
// for the others), so it is for small messages only (algorithm.cc).
//
// Why no notifications (AllreduceRing's second round trip): on the
// synchronous pairs a message is read from the socket only when this
// rank waits for it, in the order its peer sent it, and each pair carries
// at most one message each way per run. So a peer that has finished run n
// and started run n+1 leaves its next message in the socket until this
// rank waits for it in run n+1; it cannot overwrite run n's. On Gloo's
// asynchronous pairs the device thread would store that message at once,
// so the class must not run there (BoundAlgorithms keeps it off them).
//
// World sizes that are not a power of two: with P the largest power of two
// below W, rank P + i first sends its data to rank i, which folds it in,
// and after the P ranks' doubling steps gets the result back from rank i:
// two messages more.
//
// Every rank gets bit-identical results: each reduction takes the lower
// rank's operand first, so both ends of an exchange compute the same
// expression (which matters where the operation is not symmetric, such as
// min and max with NaNs).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_ALLREDUCE_RECURSIVE_DOUBLING_H_
#define DIST_PLUGINS_BACKENDS_GLOO_ALLREDUCE_RECURSIVE_DOUBLING_H_

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"
#include "plugins/backends/gloo/peer_spin.h"

namespace dist_gloo {

// How many doubling steps recursive doubling takes on `world_size` ranks:
// log2 of the largest power of two not above it (the ranks beyond that
// power are folded in).
inline int RecursiveDoublingSteps(int world_size) {
  int steps = 0;
  while ((2 << steps) <= world_size) ++steps;
  return steps;
}

template <typename T>
class AllreduceRecursiveDoubling : public gloo::Algorithm {
 public:
  // Reduces `count` elements at `data` (borrowed; it outlives this object)
  // in place on every run, with `fn` (x = x op y). `spin` (borrowed, may
  // be null) polls a partner's socket before each wait (peer_spin.h).
  AllreduceRecursiveDoubling(const std::shared_ptr<gloo::Context>& context, T* data, int count,
                             const gloo::ReductionFunction<T>* fn, PeerSpin* spin = nullptr)
      : gloo::Algorithm(context),
        data_(data),
        count_(static_cast<size_t>(count)),
        bytes_(count_ * sizeof(T)),
        fn_(fn),
        spin_(spin) {
    if (contextSize_ == 1 || count_ == 0) return;
    const int steps = RecursiveDoublingSteps(contextSize_);
    const int power = 1 << steps;
    // The same slot numbers on every rank: one a doubling step, then the
    // fold and the unfold (both directions of a pair may share a slot).
    const int base = context_->nextSlot(steps + 2);
    const int fold_slot = base + steps;
    const int unfold_slot = base + steps + 1;
    const int rank = contextRank_;
    if (rank >= power) {
      // An extra rank: its data to rank - P, the result back from it.
      fold_partner_ = rank - power;
      auto& pair = getPair(rank - power);
      fold_send_ = pair->createSendBuffer(fold_slot, data_, bytes_);
      unfold_recv_ = pair->createRecvBuffer(unfold_slot, data_, bytes_);
      return;
    }
    inboxes_.reserve(static_cast<size_t>(steps) + 1);
    if (rank + power < contextSize_) {
      fold_partner_ = rank + power;
      auto& pair = getPair(rank + power);
      inboxes_.emplace_back(count_);
      fold_recv_ = pair->createRecvBuffer(fold_slot, inboxes_.back().data(), bytes_);
      unfold_send_ = pair->createSendBuffer(unfold_slot, data_, bytes_);
    }
    for (int step = 0; step < steps; ++step) {
      const int partner = rank ^ (1 << step);
      auto& pair = getPair(partner);
      inboxes_.emplace_back(count_);
      Step next;
      next.partner = partner;
      next.lower = rank < partner;
      next.inbox = inboxes_.back().data();
      next.send = pair->createSendBuffer(base + step, data_, bytes_);
      next.recv = pair->createRecvBuffer(base + step, next.inbox, bytes_);
      steps_.push_back(std::move(next));
    }
  }

  void run() override {
    if (contextSize_ == 1 || count_ == 0) return;
    if (fold_send_ != nullptr) {  // an extra rank
      fold_send_->send();
      fold_send_->waitSend();
      Receive(fold_partner_, *unfold_recv_);
      return;
    }
    if (fold_recv_ != nullptr) {
      Receive(fold_partner_, *fold_recv_);
      fn_->call(data_, inboxes_.front().data(), count_);  // rank i < rank P + i
    }
    for (Step& step : steps_) {
      step.send->send();
      Receive(step.partner, *step.recv);
      // The send reads data_ until it completes; only then is it reduced into.
      step.send->waitSend();
      if (step.lower) {
        fn_->call(data_, step.inbox, count_);
      } else {
        fn_->call(step.inbox, data_, count_);
        std::memcpy(data_, step.inbox, bytes_);
      }
    }
    if (unfold_send_ != nullptr) {
      unfold_send_->send();
      unfold_send_->waitSend();
    }
  }

 private:
  void Receive(int peer, gloo::transport::Buffer& recv) {
    ReceiveFrom(spin_, peer, bytes_, *getPair(peer), recv);
  }

  struct Step {
    int partner = -1;
    bool lower = false;  // this rank's operand goes first
    T* inbox = nullptr;
    std::unique_ptr<gloo::transport::Buffer> send;
    std::unique_ptr<gloo::transport::Buffer> recv;
  };

  T* const data_;
  const size_t count_;
  const size_t bytes_;
  const gloo::ReductionFunction<T>* const fn_;
  PeerSpin* const spin_;
  int fold_partner_ = -1;
  // Where the peers' messages land: the fold's (if any) first, then one a
  // step. Never resized once a buffer points into them.
  std::vector<std::vector<T>> inboxes_;
  std::vector<Step> steps_;
  std::unique_ptr<gloo::transport::Buffer> fold_send_;    // an extra rank's data out
  std::unique_ptr<gloo::transport::Buffer> unfold_recv_;  // and the result in
  std::unique_ptr<gloo::transport::Buffer> fold_recv_;    // a partner's data in
  std::unique_ptr<gloo::transport::Buffer> unfold_send_;  // and the result out
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_ALLREDUCE_RECURSIVE_DOUBLING_H_

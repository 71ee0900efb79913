// All_reduce (a reduce-scatter, then an all-gather), all_gather and
// broadcast (a chain) on a ring, in chunks, straight between the callers'
// buffers: dist's own class for large messages on the synchronous pairs.
//
// Why: for large buffers the bytes, not the latencies, cost. Gloo's
// classes copy the caller's data into their own buffers and out again,
// gloo::allreduce's ring posts a receive and waits for the peer's go-ahead
// for each piece, and on the asynchronous pairs Gloo's device thread reads
// every message, a second thread and a wake-up per message. Here each rank
// writes a chunk to its right neighbour and reads one from its left in turn
// on its own thread, sending from and receiving into the callers' memory
// (a reduce-scatter chunk lands in a small inbox that stays in cache while
// it is reduced): per byte one copy into the kernel, one out of it, and the
// reduction. Chunks pipeline the steps: a chunk reduced in one step is sent
// on in the next while later chunks still arrive.
//
// Why it cannot deadlock, nor overwrite: on the synchronous pairs a message
// is read only when its receiver waits for it, in the order it was sent,
// and a write returns once the kernel has taken it. Every rank alternates
// one write to the right with one read from the left, so a rank is at most
// W-1 chunks ahead of its right neighbour: at most W chunks wait on a link.
// The chunk is chosen so that W of them fit in the room the ranks agreed on
// (RingChunkBytes: twice the synchronous message limit, which is half the
// send buffer), so no write waits for a read that waits for it. A next
// run's messages stay in the socket until this rank's next run reads them.
//
// Every rank gets the same bits: each block is reduced along the ring in one
// order, by one chain of ranks, and its result is copied to every rank.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_RING_PIPELINED_H_
#define DIST_PLUGINS_BACKENDS_GLOO_RING_PIPELINED_H_

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>

#include "dist/cpp/reduce.hpp"
#include "dist/types.h"
#include "gloo/algorithm.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"
#include "plugins/backends/gloo/buffer_memory.h"
#include "plugins/backends/gloo/peer_spin.h"
#include "plugins/backends/gloo/socket_deadline.h"

namespace dist_gloo {

// The chunk for a ring of `world_size` ranks on synchronous pairs whose
// agreed message limit is `sync_limit` (sync_limit.h), a multiple of
// `element_bytes`; 0 where no chunk of a useful size fits.
inline size_t RingChunkBytes(size_t sync_limit, int world_size, size_t element_bytes) {
  // Large enough that a message's fixed costs (a system call, a wake-up)
  // are small against its copy, small enough that the inbox stays in L2.
  constexpr size_t kPreferred = size_t{256} << 10;
  constexpr size_t kSmallest = size_t{16} << 10;
  const size_t room = world_size > 0 ? 2 * sync_limit / static_cast<size_t>(world_size) : 0;
  size_t chunk = std::min(kPreferred, room);
  chunk -= chunk % element_bytes;
  return chunk >= kSmallest ? chunk : 0;
}

class RingPipelined : public gloo::Algorithm {
 public:
  // Moves up to `bytes` (an all_reduce's buffer, an all_gather's output) in
  // chunks of `chunk` bytes; `inbox` (borrowed, `chunk` bytes, it outlives
  // this object) receives the reduce-scatter's chunks. `spin` (borrowed,
  // may be null) polls the left neighbour's socket before each wait
  // (peer_spin.h); its sockets, which every read and write waits on for at
  // most `pair_timeout`, also bound each run by one pair timeout
  // (socket_deadline.h).
  RingPipelined(const std::shared_ptr<gloo::Context>& context, size_t bytes, void* inbox,
                size_t chunk, PeerSpin* spin, std::chrono::milliseconds pair_timeout)
      : gloo::Algorithm(context),
        bytes_(bytes),
        chunk_(chunk),
        inbox_(inbox),
        spin_(spin),
        left_((contextRank_ + contextSize_ - 1) % contextSize_),
        bound_(spin != nullptr ? spin->socket((contextRank_ + 1) % contextSize_) : -1,
               spin != nullptr ? spin->socket(left_) : -1, pair_timeout) {
    if (contextSize_ == 1) return;
    const int right = (contextRank_ + 1) % contextSize_;
    // The same two slots on every rank: partial chunks into the right's
    // inbox, finished ones into the right's output.
    const int partial_slot = context_->nextSlot(2);
    result_slot_ = partial_slot + 1;
    auto& to_right = getPair(right);
    // Until a run lends them the callers' memory, the send buffers point at
    // a byte of this object's: nothing sends from them between runs.
    partial_from_input_ = to_right->createSendBuffer(partial_slot, &idle_, bytes);
    partial_from_output_ = to_right->createSendBuffer(partial_slot, &idle_, bytes);
    result_from_input_ = to_right->createSendBuffer(result_slot_, &idle_, bytes);
    result_from_output_ = to_right->createSendBuffer(result_slot_, &idle_, bytes);
    partial_in_ = getPair(left_)->createRecvBuffer(partial_slot, inbox_, chunk_);
  }

  // All_reduce of `count` elements of `dtype` from `send` into `recv` (the
  // same memory for in place; otherwise they must not overlap) with `op`;
  // avg is divided once, by the rank that finishes each block.
  void AllReduce(const void* send, void* recv, size_t count, dist_dtype_t dtype,
                 dist_reduce_op_t op) {
    const size_t element = dist_dtype_size(dtype);
    if (contextSize_ == 1) {
      if (recv != send) std::memcpy(recv, send, count * element);
      return;
    }
    const Blocks blocks{count, contextSize_, element};
    const auto* input = static_cast<const char*>(send);
    auto* output = static_cast<char*>(recv);
    SocketDeadline::Run run(bound_);
    LentMemory lent;
    Lend(lent, send, recv);
    const auto result_in = ResultInto(recv);
    // Reduce-scatter: in step s this rank sends block r-s (its own data at
    // first, then what it reduced in the step before) and reduces block
    // r-s-1 from its left neighbour with its own data. It ends with block
    // r+1 reduced over every rank.
    for (int step = 0; step + 1 < contextSize_; ++step) {
      const int out_block = Wrap(contextRank_ - step);
      const int in_block = Wrap(contextRank_ - step - 1);
      gloo::transport::Buffer& from = step == 0 ? *partial_from_input_ : *partial_from_output_;
      Exchange(blocks, out_block, from, *partial_in_, in_block, [&](size_t offset, size_t length) {
        dist::ReduceInto(dtype, op, inbox_, input + offset, length / element);
        std::memcpy(output + offset, inbox_, length);
      });
    }
    const int finished = Wrap(contextRank_ + 1);
    if (op == DIST_AVG) {
      dist::FinishAverage(dtype, output + blocks.Begin(finished), blocks.Length(finished) / element,
                          contextSize_);
    }
    AllGatherSteps(blocks, finished, *result_in);
  }

  // All_gather of `block` bytes from every rank's `send` into `recv` (W
  // blocks in rank order; `send` may be this rank's block of `recv`).
  void AllGather(const void* send, void* recv, size_t block) {
    const Blocks blocks{block * static_cast<size_t>(contextSize_), contextSize_, 1};
    char* mine = static_cast<char*>(recv) + blocks.Begin(contextRank_);
    if (mine != send) std::memcpy(mine, send, block);
    if (contextSize_ == 1) return;
    SocketDeadline::Run run(bound_);
    LentMemory lent;
    Lend(lent, send, recv);
    const auto result_in = ResultInto(recv);
    AllGatherSteps(blocks, contextRank_, *result_in);
  }

  // Broadcast of `bytes` from `root`'s `send` into every other rank's
  // `recv` along the ring from the root (the root's `recv` gets a copy): a
  // chain, each rank passing every chunk on as it arrives, so no rank sends
  // more than the buffer once. The last rank sends nothing: no cycle, no
  // bound on the chunks in flight needed.
  void Broadcast(const void* send, void* recv, size_t bytes, int root) {
    const int position = Wrap(contextRank_ - root);
    if (contextSize_ > 1) Chain(send, recv, bytes, position);
    if (position == 0 && recv != send) std::memcpy(recv, send, bytes);
  }

  void run() override {}  // runs only through AllReduce, AllGather and Broadcast

 private:
  void Chain(const void* send, void* recv, size_t bytes, int position) {
    SocketDeadline::Run run(bound_);
    LentMemory lent;
    Lend(lent, send, recv);
    const auto result_in = ResultInto(recv);
    const bool forwards = position + 1 < contextSize_;
    for (size_t done = 0; done < bytes; done += chunk_) {
      const size_t length = std::min(chunk_, bytes - done);
      if (position != 0) {
        bound_.BeforeReceive();
        ReceiveFrom(spin_, left_, length, *getPair(left_), *result_in);
      }
      if (!forwards) continue;
      gloo::transport::Buffer& from = position == 0 ? *result_from_input_ : *result_from_output_;
      bound_.BeforeSend();
      from.send(done, length, done);
      from.waitSend();
    }
  }

  // W blocks of `count` elements, as even as they go; in bytes.
  struct Blocks {
    size_t count;
    int world;
    size_t element;
    size_t Begin(int b) const {
      const size_t w = static_cast<size_t>(world), i = static_cast<size_t>(b);
      return element * (i * (count / w) + std::min(i, count % w));
    }
    size_t Length(int b) const { return Begin(b + 1) - Begin(b); }
  };

  int Wrap(int block) const { return ((block % contextSize_) + contextSize_) % contextSize_; }

  void Lend(LentMemory& lent, const void* send, void* recv) {
    void* input = const_cast<void*>(send);
    lent.Lend(*partial_from_input_, &idle_, input);
    lent.Lend(*result_from_input_, &idle_, input);
    lent.Lend(*partial_from_output_, &idle_, recv);
    lent.Lend(*result_from_output_, &idle_, recv);
  }

  // The buffer finished chunks from the left land in, registered for one
  // run only: a receive buffer stays the target of its slot while it
  // exists, and between runs there is no caller's memory to point it at
  // (Gloo checks a message against the buffer's size, not its memory).
  std::unique_ptr<gloo::transport::Buffer> ResultInto(void* recv) {
    return getPair(left_)->createRecvBuffer(result_slot_, recv, bytes_);
  }

  // All-gather steps: this rank holds block `held` finished; in step s it
  // sends block held-s to the right and receives block held-s-1 from the
  // left into the output.
  void AllGatherSteps(const Blocks& blocks, int held, gloo::transport::Buffer& result_in) {
    for (int step = 0; step + 1 < contextSize_; ++step) {
      Exchange(blocks, Wrap(held - step), *result_from_output_, result_in, Wrap(held - step - 1),
               [](size_t, size_t) {});
    }
  }

  // One step: block `out_block` from `from` to the right neighbour and
  // block `in_block` from the left into `into`, a chunk each way in turn.
  // The left neighbour sends `in_block` in the same step, so both ends count
  // the same chunks. Partial chunks go to the inbox (offset 0), and then
  // `on_chunk(offset, length)` runs with the chunk's place in the layout;
  // finished ones land at their place in the output.
  template <typename OnChunk>
  void Exchange(const Blocks& blocks, int out_block, gloo::transport::Buffer& from,
                gloo::transport::Buffer& into, int in_block, OnChunk&& on_chunk) {
    const size_t out_begin = blocks.Begin(out_block), out_length = blocks.Length(out_block);
    const size_t in_begin = blocks.Begin(in_block), in_length = blocks.Length(in_block);
    const bool to_inbox = &into == partial_in_.get();
    for (size_t done = 0; done < out_length || done < in_length; done += chunk_) {
      if (done < out_length) {
        const size_t offset = out_begin + done;
        bound_.BeforeSend();
        from.send(offset, std::min(chunk_, out_length - done), to_inbox ? 0 : offset);
        from.waitSend();
      }
      if (done < in_length) {
        const size_t length = std::min(chunk_, in_length - done);
        bound_.BeforeReceive();
        ReceiveFrom(spin_, left_, length, *getPair(left_), into);
        if (to_inbox) on_chunk(in_begin + done, length);
      }
    }
  }

  const size_t bytes_;
  const size_t chunk_;
  void* const inbox_;
  PeerSpin* const spin_;
  const int left_;
  SocketDeadline bound_;
  int result_slot_ = 0;
  char idle_ = 0;  // where the buffers point between runs
  std::unique_ptr<gloo::transport::Buffer> partial_from_input_;   // to the right's inbox
  std::unique_ptr<gloo::transport::Buffer> partial_from_output_;  // the same, from the output
  std::unique_ptr<gloo::transport::Buffer> result_from_input_;    // the same, from the input
  std::unique_ptr<gloo::transport::Buffer> result_from_output_;   // to the right's output
  std::unique_ptr<gloo::transport::Buffer> partial_in_;           // from the left, into inbox_
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_RING_PIPELINED_H_

// Empty messages between two ranks in one slot: what dist's barriers on the
// synchronous pairs send and wait for (barrier_dissemination.h,
// barrier_all_to_all.h, barrier_all_to_one.h).
//
// Why empty: a receiver reads Gloo's header alone, one read a message,
// where Gloo's own barriers send 4 bytes, which take two (the header, then
// the payload).
#ifndef DIST_PLUGINS_BACKENDS_GLOO_EMPTY_MESSAGES_H_
#define DIST_PLUGINS_BACKENDS_GLOO_EMPTY_MESSAGES_H_

#include <memory>

#include "gloo/context.h"
#include "gloo/transport/buffer.h"
#include "plugins/backends/gloo/peer_spin.h"

namespace dist_gloo {

class EmptyMessages {
 public:
  // Sends to rank `to` and receives from rank `from` in `slot` of `context`
  // (both other than this rank; the same rank for an exchange).
  EmptyMessages(gloo::Context& context, int slot, int to, int from)
      : context_(context),
        from_(from),
        send_(context.getPair(to)->createSendBuffer(slot, &empty_, 0)),
        recv_(context.getPair(from)->createRecvBuffer(slot, &empty_, 0)) {}

  EmptyMessages(const EmptyMessages&) = delete;
  EmptyMessages& operator=(const EmptyMessages&) = delete;

  void Send() { send_->send(); }
  // Returns once this slot's message from `from` has been read; polls the
  // peer's socket first through `spin` (borrowed, may be null).
  void WaitFor(PeerSpin* spin) { ReceiveFrom(spin, from_, 0, *context_.getPair(from_), *recv_); }
  void WaitSent() { send_->waitSend(); }

 private:
  gloo::Context& context_;
  const int from_;
  char empty_ = 0;  // what the buffers point at; never read or written
  std::unique_ptr<gloo::transport::Buffer> send_;
  std::unique_ptr<gloo::transport::Buffer> recv_;
};

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_EMPTY_MESSAGES_H_

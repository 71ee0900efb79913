// send/recv on Gloo unbound buffers. The worker posts them in issue order
// and does not wait (a send completes only once the peer posts the
// matching recv, so waiting here would deadlock two ranks that send to
// each other before receiving); P2pCompleter waits for them.
#include "gloo/transport/unbound_buffer.h"
#include "plugins/backends/gloo/buffers.h"
#include "plugins/backends/gloo/op.h"

namespace dist::gloo_backend {
namespace {

// Slots of user tags live apart from Gloo's collectives, whose slots carry
// a non-zero prefix in the top byte (gloo/types.h, Slot::build); 0xd1 is
// not one of Gloo's prefixes.
constexpr uint64_t kP2pSlotPrefix = uint64_t{0xd1} << 56;
constexpr uint64_t kTagMask = (uint64_t{1} << 56) - 1;

}  // namespace

PostedP2p PostP2p(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const bool is_send = op.kind == DIST_COLL_SEND;
  const dist_buffer_t& buffer = is_send ? a.send : a.recv;
  const uint64_t slot = kP2pSlotPrefix | (static_cast<uint64_t>(a.tag) & kTagMask);
  PostedP2p posted;
  posted.is_send = is_send;
  posted.peer = a.peer;
  posted.buffer = env.context->createUnboundBuffer(buffer.data, Bytes(buffer.dtype, buffer.count));
  if (is_send) {
    posted.buffer->send(a.peer, slot);
  } else {
    posted.buffer->recv(a.peer, slot);
  }
  return posted;
}

}  // namespace dist::gloo_backend

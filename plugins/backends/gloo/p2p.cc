// send/recv on Gloo unbound buffers. The worker posts them in issue order
// and does not wait (a send completes only once the peer posts the
// matching recv, so waiting here would deadlock two ranks that send to
// each other before receiving); P2pCompleter waits for them.
#include "gloo/transport/unbound_buffer.h"
#include "plugins/backends/gloo/buffers.h"
#include "plugins/backends/gloo/op.h"

namespace dist_gloo {
namespace {

// Slot layout: 0xd1 in the top byte keeps user tags apart from Gloo's
// collectives (their prefixes are 0x01..0x08, gloo/types.h); the next 24
// bits hash the byte count, so that a send and a recv whose sizes disagree
// never match (Gloo would abort the process on a message larger than the
// posted receive; this way both sides time out with an error); the low 32
// bits are the user's tag (tags are compared modulo 2^32).
constexpr uint64_t kP2pSlotPrefix = uint64_t{0xd1} << 56;

uint64_t P2pSlot(int64_t tag, size_t bytes) {
  uint64_t size_hash = (static_cast<uint64_t>(bytes) * 0x9e3779b97f4a7c15ull) >> 40;  // 24 bits
  return kP2pSlotPrefix | (size_hash << 32) | (static_cast<uint64_t>(tag) & 0xffffffffull);
}

}  // namespace

PostedP2p PostP2p(const Op& op, const OpEnv& env) {
  const dist_op_args_t& a = op.args;
  const bool is_send = op.kind == DIST_COLL_SEND;
  const dist_buffer_t& buffer = is_send ? a.send : a.recv;
  const size_t bytes = Bytes(buffer.dtype, buffer.count);
  const uint64_t slot = P2pSlot(a.tag, bytes);
  PostedP2p posted;
  posted.is_send = is_send;
  posted.peer = a.peer;
  posted.buffer = env.context->createUnboundBuffer(buffer.data, bytes);
  if (is_send) {
    posted.buffer->send(a.peer, slot);
  } else {
    posted.buffer->recv(a.peer, slot);
  }
  return posted;
}

}  // namespace dist_gloo

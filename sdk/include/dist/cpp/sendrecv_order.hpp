// The order in which a send/recv pair (dist_sendrecv) is issued when a
// backend has no `run_sendrecv` of its own: shared by the core's fallback and
// the SDK adapter's default, so that both agree on every rank.
#ifndef DIST_CPP_SENDRECV_ORDER_HPP_
#define DIST_CPP_SENDRECV_ORDER_HPP_

namespace dist {

// Whether `rank` issues its send to `dst` before its recv. CPU backends
// progress both either way; a backend that runs a rank's operations one
// after another in issue order (NCCL, on one stream) would deadlock if every
// rank of a ring sent first. Sending first exactly when the destination is
// a higher rank breaks every cycle: in each cycle of ranks sending to one
// another, the highest rank receives first, and the rank it receives from
// sent first. So any pattern where each rank sends to one rank and receives
// from one (a ring shift, a pairwise exchange, any permutation) completes.
inline bool SendRecvSendsFirst(int rank, int dst) { return dst > rank; }

}  // namespace dist

#endif  // DIST_CPP_SENDRECV_ORDER_HPP_

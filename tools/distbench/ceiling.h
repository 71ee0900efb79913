// The loopback TCP ceiling (--ceiling): what plain TCP over 127.0.0.1
// carries between the same ranks, measured in the same run and rounds as
// the plugin, so a table can say how close the plugin comes to the
// transport under it.
//
// For each case every rank sends RingShiftBytes (the bytes one rank of a
// ring moves per call, which nccl-tests' bus bandwidth counts: for
// all_reduce 2(W-1)/W of the buffer) to its right neighbour while it
// receives as many from its left, both at once, as every step of a ring
// does, over a LoopbackRing (loopback_ring.h) with the send buffers the
// gloo plugin asks for, in the plugin ring's 256 KiB chunks, waiting as
// the plugin waits. The bytes come from and go to a chunk of the
// ceiling's own that stays in cache, and nothing is reduced: what is left
// is loopback TCP's own cost (a copy into the kernel and one out of it per
// byte, and the protocol), so no ring over these sockets can be faster,
// and plugin busbw / ceiling busbw is the fraction of the transport the
// plugin gets. It is a bandwidth figure: for small messages the wake-ups,
// not the bytes, set both times.
#ifndef DIST_TOOLS_DISTBENCH_CEILING_H_
#define DIST_TOOLS_DISTBENCH_CEILING_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/distbench/baseline.h"
#include "tools/distbench/collectives.h"
#include "tools/distbench/loopback_ring.h"

namespace distbench {

class LoopbackCeiling {
 public:
  // Collective over setup.pg: every rank gets a ceiling or every rank gets
  // the same kind of error (why there is none: one rank, ranks on several
  // hosts, or a connection that failed).
  static absl::StatusOr<std::unique_ptr<LoopbackCeiling>> Make(const BaselineSetup& setup);

  // "plain TCP over 127.0.0.1, ...": what was measured.
  std::string description() const;

  // OK when the case moves bytes (not a barrier). Same answer on every rank.
  absl::Status Supports(const Case& c) const;

  // One shift of RingShiftBytes(c) through the ring.
  absl::Status Run(const Case& c);

 private:
  LoopbackCeiling(std::unique_ptr<LoopbackRing> ring, int smallest_send_buffer,
                  absl::Duration timeout, absl::Duration spin);

  std::unique_ptr<LoopbackRing> ring_;
  int smallest_send_buffer_;  // SO_SNDBUF as the kernel reports it, over every rank
  absl::Duration timeout_;
  absl::Duration spin_;
  std::vector<char> send_chunk_;
  std::vector<char> recv_chunk_;
};

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_CEILING_H_

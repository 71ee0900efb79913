// send/recv over one single-producer single-consumer byte ring per ordered
// pair of ranks. A send is eager: it completes once its bytes are in the
// ring (streaming through it in pieces, so any size fits). A recv matches by
// tag; messages from the same peer with other tags that arrive first are
// moved to a local queue, so tags may be received in any order.
#ifndef DIST_PLUGINS_BACKENDS_SHM_POINT_TO_POINT_H_
#define DIST_PLUGINS_BACKENDS_SHM_POINT_TO_POINT_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "plugins/backends/shm/segment.h"
#include "plugins/backends/shm/waiter.h"

namespace dist_shm {

class PointToPoint {
 public:
  PointToPoint(Segment* segment, Waiter* waiter, int rank)
      : segment_(segment), waiter_(waiter), rank_(rank),
        unexpected_(segment->world_size()) {}

  absl::Status Send(int peer, int64_t tag, const void* data, uint64_t bytes,
                    const OpContext& context);
  absl::Status Recv(int peer, int64_t tag, void* data, uint64_t bytes,
                    const OpContext& context);

 private:
  struct Message {
    int64_t tag;
    std::vector<char> bytes;
  };

  absl::Status Write(int peer, const char* data, uint64_t bytes, const OpContext& context);
  // Reads `bytes` from the ring from `peer` into data (NULL: discard).
  absl::Status Read(int peer, char* data, uint64_t bytes, const OpContext& context);
  absl::Status SizeMismatch(int peer, int64_t tag, uint64_t expected, uint64_t got) const;

  Segment* segment_;
  Waiter* waiter_;
  int rank_;
  std::vector<std::deque<Message>> unexpected_;  // per source rank
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_POINT_TO_POINT_H_

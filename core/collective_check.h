// DIST_DEBUG=detail: before each operation the ranks of a group compare what
// they called (group, sequence number, operation, dtype, count, reduce op,
// root, device) through the group's store, so that a mismatch fails every
// rank at once with a message naming the ranks and their calls, instead of
// hanging until the timeout. The exchange goes through the store, not the
// backend, so it works for every backend and cannot itself deadlock on the
// mismatch it is looking for; it is bounded by the group's timeout and names
// the ranks that did not arrive.
//
// Per collective #S each rank writes its fingerprint into its slot
// "r<rank>/<S % 2>", compare-and-sets "cS/ref" (the first rank's fingerprint
// stays) to learn whether it differs, and adds to "cS/n" one arrival plus, in
// the high 32 bits, one difference. The rank that completes the count sets
// "cS/done" to the verdict, which the others wait for; only on a difference
// does it read every slot to name the ranks. That is 4 store round trips per
// rank and 3 more on the last one, whatever the group's size; finished keys
// are removed or overwritten, so the store stays small.
//
// Send/recv are checked by pairing: the n-th send from A to B with tag T
// meets the n-th recv on B from A with tag T ("pA-B-tT/n"). Whichever side
// arrives second compares and fails at once on a mismatch; a side that times
// out is told what its peer posted, if anything.
#ifndef DIST_CORE_COLLECTIVE_CHECK_H_
#define DIST_CORE_COLLECTIVE_CHECK_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/flight_recorder.h"
#include "dist/store.h"

namespace dist {

class CollectiveCheck {
 public:
  // Takes ownership of `store`, a view private to this group.
  CollectiveCheck(dist_store_t* store, std::string group, int32_t rank, int32_t world_size,
                  absl::Duration timeout);
  ~CollectiveCheck();
  CollectiveCheck(const CollectiveCheck&) = delete;
  CollectiveCheck& operator=(const CollectiveCheck&) = delete;

  // Collective #seq: returns once every rank called the same operation, or
  // fails on every rank (InvalidArgument: a mismatch; DeadlineExceeded: a
  // rank did not arrive).
  absl::Status Check(uint64_t seq, const OpFingerprint& fp);

  // Send/recv: publishes this side and compares with the peer's, if there
  // already. Returns the pairing number, for Explain.
  absl::StatusOr<uint64_t> CheckPeer(const OpFingerprint& fp);

  // For a send/recv that failed: what the peer posted for the same pairing.
  std::string ExplainPeer(uint64_t pairing, const OpFingerprint& fp);

 private:
  std::string Compare(uint64_t seq);
  // This rank's fingerprint slot: "r<rank>/<seq % 2>", holding "<seq>:<fingerprint>".
  std::string SlotKey(uint64_t seq, int32_t rank) const;
  // The fingerprint `rank` published for `seq`; NotFound when it has not.
  absl::StatusOr<std::string> ReadSlot(uint64_t seq, int32_t rank);
  std::string PairKey(const OpFingerprint& fp, uint64_t pairing, bool mine) const;

  dist_store_t* const store_;
  const std::string group_;
  const int32_t rank_, world_size_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  // (peer, tag, is_send) -> how many such operations this rank issued.
  std::map<std::tuple<int32_t, int64_t, bool>, uint64_t> pairings_ ABSL_GUARDED_BY(mu_);
};

// Wire form of a fingerprint, and back (false: not one).
std::string EncodeFingerprint(const OpFingerprint& fp);
bool DecodeFingerprint(const std::string& text, OpFingerprint* fp);

}  // namespace dist

#endif  // DIST_CORE_COLLECTIVE_CHECK_H_

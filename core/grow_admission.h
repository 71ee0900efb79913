// Growing a group (dist.h 1.5): processes that join a running job
// (DIST_JOIN=1) take tickets in the store, and the growing group's rank 0
// admits them in ticket order and publishes the grown world size, which
// every member and every admitted joiner waits for. Keys live under the
// job's join namespace ("dist/<name>/join/") and the grow's own namespace.
//
//   join/tickets            counter: the last ticket taken
//   join/ticket/<t>         "waiting <host:pid>", then "admitted <rank>\t<name>\t<prefix>"
//                           (leader) or "withdrawn" (a joiner that gave up),
//                           whichever compare-and-set comes first
//   join/ticket/<t>/answer  set once the ticket was admitted
//   join/considered         the last ticket a grow decided on
//   <grow prefix>decision   "ok <world size>" or "failed <why>"
#ifndef DIST_CORE_GROW_ADMISSION_H_
#define DIST_CORE_GROW_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/store.h"

namespace dist {

// The grown group as a member or a joiner learns it.
struct GrownGroup {
  std::string name;    // "default.grow1"
  std::string prefix;  // its namespace in the store
  int32_t rank = -1;
  int32_t world_size = 0;
};

class GrowAdmission {
 public:
  // `join_prefix`: the job's join namespace. The store is borrowed.
  GrowAdmission(const dist_store_t* store, std::string join_prefix);

  // A joiner: takes a ticket and waits until a grow admits it and decides,
  // up to `timeout`; gives the ticket back if none did. `group` names the
  // job's group in errors.
  absl::StatusOr<GrownGroup> Join(const std::string& group, absl::Duration timeout) const;

  // Returns a non-OK status when the growing group can no longer grow (it
  // was revoked); asked while waiting.
  using Interrupted = std::function<absl::Status()>;

  // The growing group's rank 0: admits `joiners` tickets in order (0: every
  // one waiting, at least one), numbering them from `world_size`, and
  // publishes the decision. The grown world size.
  absl::StatusOr<int32_t> Admit(const GrownGroup& grown, int32_t world_size, int32_t joiners,
                                absl::Duration timeout, const Interrupted& interrupted) const;

  // Every other member (and Join): the decision of the grow at `prefix`.
  absl::StatusOr<int32_t> AwaitDecision(const std::string& prefix, const std::string& group,
                                        absl::Time deadline, const Interrupted& interrupted) const;

 private:
  std::string TicketKey(int64_t ticket) const;
  // Publishes a failed decision (best effort) and returns `status`.
  absl::Status Fail(const std::string& prefix, absl::Status status) const;

  const dist_store_t* store_;
  const std::string join_prefix_;
};

}  // namespace dist

#endif  // DIST_CORE_GROW_ADMISSION_H_

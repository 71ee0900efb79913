// The survival side of a process group (dist.h 1.3 and 1.5): revoke,
// failed ranks, shrink and grow, and dist_init of a joining process.
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/grow_admission.h"
#include "core/mpi_flavor.h"
#include "core/prefix_store.h"
#include "core/process_group.h"
#include "core/rendezvous.h"
#include "dist/cpp/status.hpp"

namespace dist {
namespace {

absl::Status SurvivalOffError(const char* op, const std::string& group) {
  return absl::FailedPreconditionError(absl::StrCat(
      op, " on group '", group,
      "': survival is off; set DIST_SURVIVAL=1 (or the option dist.survival=1) on every rank"));
}

}  // namespace

absl::Status ProcessGroup::StartSurvival() {
  if (!survival_settings_.enabled || rank_ < 0) return absl::OkStatus();
  absl::StatusOr<dist_store_t*> store =
      MakePrefixStore(store_->get(), absl::StrCat(store_prefix_, "survival/"));
  if (!store.ok()) return store.status();
  survival_ = std::make_unique<SurvivalMonitor>(
      *store, rank_, world_size_, name_, survival_settings_,
      [this](const std::string& message) { ApplyRevoke(message); });
  revocation_->SetPoll([monitor = survival_.get()] { monitor->PollRevoke(); });
  return absl::OkStatus();
}

void ProcessGroup::Revoke(const std::string& reason) {
  if (survival_ != nullptr) {
    survival_->Revoke(reason);  // every rank, through the store
  } else {
    ApplyRevoke(absl::StrCat("group '", name_, "' was revoked by rank ", rank_, ": ", reason,
                             " (survival is off: only on this rank)"));
  }
}

absl::Status ProcessGroup::RevokedOr(absl::Status status) {
  revocation_->Poll();
  return revocation_->revoked() ? revocation_->status() : status;
}

void ProcessGroup::ApplyRevoke(const std::string& message) {
  if (!revocation_->Revoke(message)) return;
  if (store_ != nullptr) store_->MarkFailed(message);
  AbortComms(message);
}

std::vector<FailedRank> ProcessGroup::FailedRanks() const {
  return survival_ != nullptr ? survival_->Failed() : std::vector<FailedRank>();
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Shrink(absl::Duration timeout) {
  if (rank_ < 0) return NotMemberError();
  if (survival_ == nullptr) return SurvivalOffError("dist_shrink", name_);
  DIST_RETURN_IF_ERROR(CheckRebuild("dist_shrink"));
  const int epoch = ++shrink_epoch_;
  absl::StatusOr<std::vector<int32_t>> survivors = survival_->AgreeOnSurvivors(epoch, timeout);
  if (!survivors.ok()) return survivors.status();
  // The old communicators stay revoked; the new ones are made anew, under
  // a namespace of this shrink, by the survivors alone.
  Revoke(absl::StrCat("shrunk to ranks [", absl::StrJoin(*survivors, ","), "]"));
  // The new communicators' set-up is bounded by the shrink's timeout; their
  // operations keep the group's.
  absl::StatusOr<std::unique_ptr<ProcessGroup>> shrunk =
      MakeChild(*survivors, absl::StrCat(name_, ".shrink", epoch),
                absl::StrCat(store_prefix_, "shrink", epoch, "/"), /*may_split=*/false, timeout);
  if (!shrunk.ok()) return shrunk;
  (*shrunk)->join_prefix_ = join_prefix_;  // joiners still find the job
  store_->ClearFailure();                  // the job goes on
  return shrunk;
}

absl::Status ProcessGroup::CheckRebuild(const char* op) const {
  for (const BackendComm& comm : comms_) {
    // A backend that cannot make a communicator of the survivors (MPI ends
    // the whole job when a process dies, and one without the dead ranks
    // needs ULFM, which dist does not use yet) is refused at once rather
    // than left to hang in comm_create.
    const bool declares = comm.plugin->abi_minor >= 5;
    const bool can = declares ? (comm.plugin->capabilities.flags & DIST_CAP_SHRINK) != 0
                              : !IsMpiName(comm.plugin->name);
    if (!can) {
      return absl::UnimplementedError(
          absl::StrCat(op, " on group '", name_, "': backend '", comm.plugin->name,
                       "' cannot make a communicator without the failed ranks (",
                       IsMpiName(comm.plugin->name)
                           ? "that needs MPI's ULFM extension, which dist does not use yet"
                           : "its capabilities do not include DIST_CAP_SHRINK",
                       "); use gloo or shm for jobs that must survive a failed rank"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Grow(int32_t joiners,
                                                                 absl::Duration timeout) {
  if (rank_ < 0) return NotMemberError();
  if (survival_ == nullptr) return SurvivalOffError("dist_grow", name_);
  DIST_RETURN_IF_ERROR(CheckRebuild("dist_grow"));
  if (revocation_->revoked()) {
    return absl::FailedPreconditionError(
        absl::StrCat("dist_grow on group '", name_, "': the group is revoked (",
                     revocation_->status().message(), "); shrink it first, then grow the result"));
  }
  const int epoch = ++grow_epoch_;
  GrownGroup grown;
  grown.name = absl::StrCat(name_, ".grow", epoch);
  grown.prefix = absl::StrCat(store_prefix_, "grow", epoch, "/");
  // A rank that fails during the grow revokes the group: stop waiting then.
  const GrowAdmission::Interrupted interrupted = [this] { return revocation_->status(); };
  const GrowAdmission admission(store_->get(), join_prefix_);
  absl::StatusOr<int32_t> world =
      rank_ == 0
          ? admission.Admit(grown, world_size_, joiners, timeout, interrupted)
          : admission.AwaitDecision(grown.prefix, grown.name, absl::Now() + timeout, interrupted);
  if (!world.ok()) return world.status();
  std::vector<int32_t> ranks(*world);
  std::iota(ranks.begin(), ranks.end(), 0);  // members keep theirs; joiners follow
  absl::StatusOr<std::unique_ptr<ProcessGroup>> made =
      MakeChild(ranks, grown.name, grown.prefix, /*may_split=*/false, timeout);
  if (!made.ok()) return made;
  (*made)->join_prefix_ = join_prefix_;
  store_->ClearFailure();  // the job goes on
  return made;
}

absl::Status ProcessGroup::JoinRunningGroup(const ResolvedConfig& config,
                                            const dist_rendezvous_hints_t& hints,
                                            std::shared_ptr<StoreOwner> host_store) {
  if (!config.survival_enabled) {
    return absl::FailedPreconditionError(
        absl::StrCat("DIST_JOIN (", config.join.source,
                     "): a joining process needs survival on, as the job's ranks have it; set "
                     "DIST_SURVIVAL=1 (or the option dist.survival=1)"));
  }
  if (host_store != nullptr) {
    store_ = std::move(host_store);
  } else {
    absl::StatusOr<dist_store_t*> store =
        OpenStoreToJoin(config.init_method.value, hints, timeout_);
    if (!store.ok()) return store.status();
    store_ = std::make_shared<StoreOwner>(*store);
  }
  const GrowAdmission admission(store_->get(), join_prefix_);
  absl::StatusOr<GrownGroup> grown = admission.Join(name_, timeout_);
  if (!grown.ok()) return grown.status();
  name_ = grown->name;
  store_prefix_ = grown->prefix;
  rank_ = parent_rank_ = grown->rank;
  world_size_ = grown->world_size;
  return absl::OkStatus();
}

}  // namespace dist

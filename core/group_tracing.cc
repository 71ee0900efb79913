#include "core/group_tracing.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dist {

GroupTracing::GroupTracing(const TraceOptions& options, std::string group, int32_t global_rank,
                           int32_t rank, int32_t world_size, std::string backends,
                           dist_store_t* check_store, absl::Duration timeout)
    : options_(options) {
  recorder_ = std::make_shared<FlightRecorder>(
      group, global_rank, rank, world_size, std::move(backends),
      rank < 0 ? 0 : static_cast<size_t>(options.entries), options.dir);
  if (check_store != nullptr) {
    check_ =
        std::make_unique<CollectiveCheck>(check_store, std::move(group), rank, world_size, timeout);
  }
}

absl::Status GroupTracing::Enter(const OpFingerprint& fp,
                                 absl::FunctionRef<void(const std::string&)> abort, TracedOp* op) {
  op->fp = fp;
  op->pairing = 0;
  const bool p2p = IsPointToPoint(fp.op);
  const uint64_t seq = p2p ? ++p2p_seq_ : ++collective_seq_;
  op->trace_id = recorder_->Issue(seq, fp, /*started=*/check_ == nullptr);
  if (check_ == nullptr) return absl::OkStatus();
  absl::Status checked;
  if (p2p) {
    absl::StatusOr<uint64_t> paired = check_->CheckPeer(fp);
    checked = paired.status();
    if (paired.ok()) op->pairing = *paired;
  } else {
    checked = check_->Check(seq, fp);
  }
  if (checked.ok()) return checked;
  if (checked.code() == absl::StatusCode::kDeadlineExceeded) abort(std::string(checked.message()));
  return Failed(*op, checked);
}

absl::Status GroupTracing::Explain(const TracedOp& op, absl::Status status) {
  if (op.pairing == 0 || check_ == nullptr) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), check_->ExplainPeer(op.pairing, op.fp)));
}

absl::Status GroupTracing::Failed(const TracedOp& op, absl::Status status) {
  status = Explain(op, std::move(status));
  recorder_->End(op.trace_id, status);
  recorder_->DumpAfterFailure(std::string(status.message()));
  return status;
}

}  // namespace dist

// dist conformance kit: the suite's "rules" section.
// The buffer rule and the struct_size rule.
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

absl::Status Suite::GatherCheck(Comm& comm, size_t args_size) {
  const int32_t world = comm.world_size();
  if (!Declared(DIST_COLL_ALL_GATHER)) {
    dist_op_args_t a =
        MakeArgs(dist_make_buffer(nullptr, 0, PreferredDtype(), device_),
                 dist_make_buffer(nullptr, 0, PreferredDtype(), device_), options_.op_timeout_ms);
    CONFORMANCE_ASSIGN(work, comm.StartSized(DIST_COLL_BARRIER, a, args_size));
    return work->Wait(options_.op_timeout_ms + kWaitSlackMs);
  }
  const dist_dtype_t dtype = PreferredDtype();
  constexpr uint64_t kN = 4;
  const size_t block = kN * dist_dtype_size(dtype);
  CONFORMANCE_ASSIGN(send, Filled(device_, block, static_cast<unsigned char>(comm.rank() + 1)));
  CONFORMANCE_ASSIGN(recv, Filled(device_, block * world, 0));
  CONFORMANCE_RETURN_IF_ERROR(send->Upload());
  CONFORMANCE_RETURN_IF_ERROR(recv->Upload());
  dist_op_args_t a =
      MakeArgs(dist_make_buffer(send->data(), kN, dtype, device_),
               dist_make_buffer(recv->data(), kN * world, dtype, device_), options_.op_timeout_ms);
  CONFORMANCE_ASSIGN(work, comm.StartSized(DIST_COLL_ALL_GATHER, a, args_size));
  CONFORMANCE_RETURN_IF_ERROR(work->Wait(options_.op_timeout_ms + kWaitSlackMs));
  CONFORMANCE_RETURN_IF_ERROR(recv->Download());
  for (size_t i = 0; i < block * world; ++i) {
    const unsigned char want = static_cast<unsigned char>(i / block + 1);
    if (recv->host()[i] != want) {
      return absl::InternalError(absl::StrCat("all_gather byte ", i, " is ",
                                              static_cast<int>(recv->host()[i]), ", want ",
                                              static_cast<int>(want)));
    }
  }
  return absl::OkStatus();
}

// The rules every backend shares, whatever its library: the buffer rule of
// dist/backend_plugin.h (counts are exact) and the struct_size rule of
// sdk/ABI.md for the config and the argument block.
void Suite::SharedRules() {
  const int32_t world = comm_.world_size();
  const dist_dtype_t dtype = PreferredDtype();
  constexpr uint64_t kN = 4;
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  auto buffer = [&](uint64_t count) {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> b = Filled(device_, (kN * world + 64) * 8, 0);
    if (!b.ok()) return dist_make_buffer(nullptr, 0, dtype, device_);
    (void)(*b)->Upload();
    keep.push_back(std::move(*b));
    return dist_make_buffer(keep.back()->data(), count, dtype, device_);
  };
  // The buffer rule: one element more or less than the table says fails on
  // every rank (only the unrooted collectives: off the root, a rooted one
  // has no second buffer to compare with).
  for (dist_collective_t coll : {DIST_COLL_ALL_REDUCE, DIST_COLL_ALL_GATHER,
                                 DIST_COLL_REDUCE_SCATTER, DIST_COLL_ALL_TO_ALL}) {
    if (!Declared(coll)) continue;
    for (int64_t delta : {1, -1}) {
      uint64_t s = 0, r = 0;
      Shapes(coll, kN, world, &s, &r);
      // The buffer whose count the rule derives from the other one.
      const bool grow_send = coll == DIST_COLL_REDUCE_SCATTER;
      (grow_send ? s : r) += delta;
      dist_op_args_t a = MakeArgs(buffer(s), buffer(r), options_.op_timeout_ms);
      const std::string name =
          absl::StrCat(dist_collective_name(coll), ": ", grow_send ? "send" : "recv",
                       delta > 0 ? " one element larger" : " one element smaller",
                       " than the buffer rule fails");
      if (!stuck_.empty()) {
        Record(name, dist_dtype_name(dtype), "-", absl::StrCat(kN),
               absl::AbortedError("not run: " + stuck_));
        continue;
      }
      Record(name, dist_dtype_name(dtype), "-", absl::StrCat(kN),
             ExpectFailure(comm_, coll, a, {absl::StatusCode::kInvalidArgument}));
    }
  }
  if (options_.through_core) {
    Skip("struct_size rule", "the core fills the config and the argument block itself");
    return;
  }
  // struct_size: a larger block from a newer core (trailing garbage) and the
  // smallest a 1.0 caller passes are read; one below the 1.0 size is refused.
  const size_t args_v1_0 = offsetof(dist_op_args_t, timeout_ms) + sizeof(int64_t);
  const size_t config_v1_0 = offsetof(dist_comm_config_t, device_index) + sizeof(int32_t);
  for (size_t size : {sizeof(dist_op_args_t) + 16, args_v1_0}) {
    Record(absl::StrCat("args with struct_size ", size, " (this SDK: ", sizeof(dist_op_args_t),
                        ") are read"),
           dist_dtype_name(dtype), "-", "-", GatherCheck(comm_, size));
  }
  {
    dist_op_args_t a = MakeArgs(buffer(kN), buffer(kN), options_.op_timeout_ms);
    const dist_collective_t coll =
        Declared(DIST_COLL_ALL_REDUCE) ? DIST_COLL_ALL_REDUCE : DIST_COLL_BARRIER;
    const size_t size = offsetof(dist_op_args_t, timeout_ms);
    absl::StatusOr<std::unique_ptr<Work>> work = comm_.StartSized(coll, a, size);
    Record(absl::StrCat("args with struct_size ", size, " (below ABI 1.0) are refused"),
           dist_dtype_name(dtype), "-", "-",
           work.ok() ? absl::InternalError("accepted")
           : absl::IsInvalidArgument(work.status())
               ? absl::OkStatus()
               : absl::InternalError(absl::StrCat("failed with ", work.status().ToString(),
                                                  "; want INVALID_ARGUMENT")));
    if (work.ok()) {
      stuck_ = "an argument block below the ABI 1.0 size was accepted";
      return;
    }
  }
  for (size_t size : {sizeof(dist_comm_config_t) + 16, config_v1_0}) {
    const std::string name = absl::StrCat("config with struct_size ", size,
                                          " (this SDK: ", sizeof(dist_comm_config_t), ") is read");
    absl::StatusOr<std::unique_ptr<Comm>> comm =
        comm_.DuplicateSized(absl::StrCat("sized", size), options_.op_timeout_ms, size);
    Record(name, dist_dtype_name(dtype), "-", "-",
           comm.ok() ? GatherCheck(**comm, sizeof(dist_op_args_t)) : comm.status());
  }
  {
    const size_t size = offsetof(dist_comm_config_t, device_index);
    absl::StatusOr<std::unique_ptr<Comm>> comm =
        comm_.DuplicateSized("sized_small", options_.op_timeout_ms, size);
    Record(absl::StrCat("config with struct_size ", size, " (below ABI 1.0) is refused"), "-", "-",
           "-",
           comm.ok() ? absl::InternalError("accepted")
           : absl::IsInvalidArgument(comm.status())
               ? absl::OkStatus()
               : absl::InternalError(absl::StrCat("failed with ", comm.status().ToString(),
                                                  "; want INVALID_ARGUMENT")));
  }
}

}  // namespace dist::conformance

// dist conformance kit: the suite's "errors" section.
// What is undeclared or invalid fails cleanly.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dist/cpp/validate.hpp"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::ErrorPaths() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const std::vector<absl::StatusCode> kInvalid = {absl::StatusCode::kInvalidArgument};
  const std::vector<absl::StatusCode> kBadIndex = {absl::StatusCode::kInvalidArgument,
                                                   absl::StatusCode::kOutOfRange};
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  constexpr uint64_t kN = 4;
  // Big enough for any shape below, so a backend that ignores a check writes
  // into memory it owns rather than crashing the kit.
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  auto buffer = [&](dist_dtype_t type, uint64_t count) {
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> b = Filled(device_, (kN * world + 64) * 8, 0);
    if (!b.ok()) return dist_make_buffer(nullptr, 0, type, device_);
    (void)(*b)->Upload();
    keep.push_back(std::move(*b));
    return dist_make_buffer(keep.back()->data(), count, type, device_);
  };
  auto args_for = [&](dist_collective_t coll, dist_dtype_t type) {
    uint64_t s = 0, r = 0;
    Shapes(coll, kN, world, &s, &r);
    dist_op_args_t a = MakeArgs(buffer(type, s), buffer(type, r), options_.op_timeout_ms);
    a.peer = (me + 1) % world;
    return a;
  };
  auto check = [&](const std::string& name, const std::string& type, const std::string& op,
                   dist_collective_t coll, const dist_op_args_t& args,
                   const std::vector<absl::StatusCode>& codes) {
    if (!stuck_.empty()) {
      Record(name, type, op, absl::StrCat(kN), absl::AbortedError("not run: " + stuck_));
      return;
    }
    Record(name, type, op, absl::StrCat(kN), ExpectFailure(comm_, coll, args, codes));
  };

  // Bitwise ops on floating types: INVALID_ARGUMENT wherever the op is declared.
  for (dist_collective_t coll : kReducing) {
    if (!Declared(coll)) continue;
    for (dist_reduce_op_t op : {DIST_BAND, DIST_BOR, DIST_BXOR}) {
      if ((OpsOf(coll) & (1u << op)) == 0) continue;
      for (dist_dtype_t type : DeclaredDtypes()) {
        if (!dist_dtype_is_floating(type)) continue;
        dist_op_args_t a = args_for(coll, type);
        a.op = op;
        check(absl::StrCat(dist_collective_name(coll), ": bitwise op on floating dtype"),
              dist_dtype_name(type), dist_reduce_op_name(op), coll, a, kInvalid);
      }
    }
  }
  // Undeclared reduce ops fail (the kit picks an integer dtype when declared,
  // so that the bitwise rule is not what fails them).
  dist_dtype_t int_dtype = dtype;
  for (dist_dtype_t t : DeclaredDtypes()) {
    if (!dist_dtype_is_floating(t)) {
      int_dtype = t;
      break;
    }
  }
  for (dist_collective_t coll : kReducing) {
    if (!Declared(coll)) continue;
    for (int o = 0; o < DIST_REDUCE_OP_COUNT; ++o) {
      const auto op = static_cast<dist_reduce_op_t>(o);
      if ((OpsOf(coll) & (1u << op)) != 0) continue;
      dist_op_args_t a = args_for(coll, int_dtype);
      a.op = op;
      check(absl::StrCat(dist_collective_name(coll), ": undeclared op fails"),
            dist_dtype_name(int_dtype), dist_reduce_op_name(op), coll, a, {});
    }
  }
  // Undeclared dtypes fail, on the first declared collective that takes data.
  dist_collective_t carrier = DIST_COLLECTIVE_COUNT;
  for (dist_collective_t c : {DIST_COLL_ALL_REDUCE, DIST_COLL_BROADCAST, DIST_COLL_ALL_GATHER}) {
    if (Declared(c)) {
      carrier = c;
      break;
    }
  }
  if (carrier != DIST_COLLECTIVE_COUNT) {
    for (int d = 0; d < DIST_DTYPE_COUNT; ++d) {
      const auto type = static_cast<dist_dtype_t>(d);
      if (DeclaredDtype(type)) continue;
      dist_op_args_t a = args_for(carrier, type);
      a.op = DIST_SUM;
      check(absl::StrCat(dist_collective_name(carrier), ": undeclared dtype fails"),
            dist_dtype_name(type), carrier == DIST_COLL_ALL_REDUCE ? "sum" : "-", carrier, a, {});
    }
    // Undeclared device types fail (a CPU pointer labelled as the other device).
    for (int t = 0; t < DIST_DEVICE_TYPE_COUNT; ++t) {
      const auto type = static_cast<dist_device_type_t>(t);
      if ((plugin_.caps.device_types & (1u << type)) != 0) continue;
      std::vector<unsigned char> host((kN * world + 64) * 8);
      uint64_t s = 0, r = 0;
      Shapes(carrier, kN, world, &s, &r);
      dist_device_t other = type == DIST_DEVICE_CPU ? dist_cpu() : dist_cuda(0);
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(host.data(), s, dtype, other),
                   dist_make_buffer(host.data(), r, dtype, other), options_.op_timeout_ms);
      check(absl::StrCat(dist_collective_name(carrier), ": undeclared device ",
                         dist_device_type_name(type), " fails"),
            dist_dtype_name(dtype), carrier == DIST_COLL_ALL_REDUCE ? "sum" : "-", carrier, a, {});
    }
  }
  // Undeclared collectives fail (or are absent from the table).
  for (int c = 0; c < DIST_COLLECTIVE_COUNT; ++c) {
    const auto coll = static_cast<dist_collective_t>(c);
    if (Declared(coll)) continue;
    const std::string name = absl::StrCat(dist_collective_name(coll), ": undeclared, fails");
    if (!comm_.HasOperation(coll)) {
      Record(name, "-", "-", "-", absl::OkStatus());
      continue;
    }
    check(name, dist_dtype_name(dtype), "-", coll, args_for(coll, dtype), {});
  }
  // Bad roots and peers.
  for (int c = 0; c < DIST_COLLECTIVE_COUNT; ++c) {
    const auto coll = static_cast<dist_collective_t>(c);
    if (!Declared(coll) || !dist::IsRooted(coll)) continue;
    for (int32_t root : {world, -1}) {
      dist_op_args_t a = args_for(coll, dtype);
      a.root = root;
      check(absl::StrCat(dist_collective_name(coll), ": bad root ", root), dist_dtype_name(dtype),
            dist::IsReducing(coll) ? "sum" : "-", coll, a, kBadIndex);
    }
  }
  for (dist_collective_t coll : {DIST_COLL_SEND, DIST_COLL_RECV}) {
    if (!Declared(coll)) continue;
    dist_op_args_t a = args_for(coll, dtype);
    a.peer = world;
    check(absl::StrCat(dist_collective_name(coll), ": bad peer ", world), dist_dtype_name(dtype),
          "-", coll, a, kBadIndex);
  }
  // Local shape errors, the same on every rank.
  if (Declared(DIST_COLL_ALL_GATHER)) {
    dist_op_args_t a = args_for(DIST_COLL_ALL_GATHER, dtype);
    a.recv.count = kN * world - 1;
    check("all_gather: recv smaller than send*W", dist_dtype_name(dtype), "-", DIST_COLL_ALL_GATHER,
          a, {});
  }
  if (Declared(DIST_COLL_ALL_REDUCE) && DeclaredDtypes().size() >= 2) {
    const dist_dtype_t other = DeclaredDtypes()[DeclaredDtypes()[0] == dtype ? 1 : 0];
    dist_op_args_t a = args_for(DIST_COLL_ALL_REDUCE, dtype);
    a.recv.dtype = other;
    check("all_reduce: send and recv dtypes differ",
          absl::StrCat(dist_dtype_name(dtype), "/", dist_dtype_name(other)), "sum",
          DIST_COLL_ALL_REDUCE, a, {});
  }
  // Overlapping buffers that are not in place (validate.hpp's one rule), on
  // the collectives every rank refuses alike: one buffer, recv one element
  // after send, or (all_to_all) both at once. The adapter has the rule from
  // backend ABI 1.4; the core applies it to older plugins itself, so only
  // their raw tables are spared.
  const bool overlap_rule = options_.through_core || plugin_.table->abi_minor >= 4;
  for (dist_collective_t coll : {DIST_COLL_ALL_REDUCE, DIST_COLL_ALL_GATHER,
                                 DIST_COLL_REDUCE_SCATTER, DIST_COLL_ALL_TO_ALL}) {
    if (!overlap_rule || !Declared(coll)) continue;
    for (uint64_t shift : {uint64_t{1}, uint64_t{0}}) {
      if (shift == 0 && coll != DIST_COLL_ALL_TO_ALL) continue;
      dist_op_args_t a = args_for(coll, dtype);
      a.recv.data = static_cast<char*>(a.send.data) + shift * es;
      a.op = DIST_SUM;
      check(absl::StrCat(dist_collective_name(coll), shift == 0
                                                         ? ": in place, which it does not allow"
                                                         : ": recv overlaps send, not in place"),
            dist_dtype_name(dtype), dist::IsReducing(coll) ? "sum" : "-", coll, a, kInvalid);
    }
  }
}

}  // namespace dist::conformance

#include "tools/distbench/collectives.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace distbench {

const std::vector<OpInfo>& AllOps() {
  static const std::vector<OpInfo>* ops = new std::vector<OpInfo>{
      {Op::kAllReduce, "all_reduce", DIST_COLL_ALL_REDUCE, true, false, false, false},
      {Op::kBroadcast, "broadcast", DIST_COLL_BROADCAST, false, true, false, false},
      {Op::kReduce, "reduce", DIST_COLL_REDUCE, true, true, false, false},
      {Op::kAllGather, "all_gather", DIST_COLL_ALL_GATHER, false, false, false, true},
      {Op::kGather, "gather", DIST_COLL_GATHER, false, true, false, true},
      {Op::kScatter, "scatter", DIST_COLL_SCATTER, false, true, true, false},
      {Op::kReduceScatter, "reduce_scatter", DIST_COLL_REDUCE_SCATTER, true, false, true, false},
      {Op::kAllToAll, "all_to_all", DIST_COLL_ALL_TO_ALL, false, false, true, true},
      {Op::kBarrier, "barrier", DIST_COLL_BARRIER, false, false, false, false},
      {Op::kSendRecv, "sendrecv", DIST_COLL_SEND, false, false, false, false},
  };
  return *ops;
}

absl::StatusOr<const OpInfo*> FindOp(absl::string_view name) {
  std::vector<std::string> names;
  for (const OpInfo& op : AllOps()) {
    if (name == op.name) return &op;
    names.push_back(op.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown --op '", name, "'; use one of ",
                                                 absl::StrJoin(names, ", "), " or all"));
}

absl::StatusOr<std::vector<const OpInfo*>> ParseOps(absl::string_view text) {
  std::vector<const OpInfo*> ops;
  if (text == "all") {
    for (const OpInfo& op : AllOps()) ops.push_back(&op);
    return ops;
  }
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    absl::StatusOr<const OpInfo*> op = FindOp(absl::StripAsciiWhitespace(name));
    if (!op.ok()) return op.status();
    ops.push_back(*op);
  }
  if (ops.empty()) return absl::InvalidArgumentError("--op is empty; name a collective or all");
  return ops;
}

absl::StatusOr<dist_dtype_t> ParseDtype(absl::string_view text) {
  std::vector<std::string> names;
  for (int i = 0; i < DIST_DTYPE_COUNT; ++i) {
    const auto dtype = static_cast<dist_dtype_t>(i);
    if (text == dist_dtype_name(dtype)) return dtype;
    names.push_back(dist_dtype_name(dtype));
  }
  // nccl-tests' short spellings.
  if (text == "float" || text == "f32") return DIST_FLOAT32;
  if (text == "double" || text == "f64") return DIST_FLOAT64;
  if (text == "half" || text == "f16") return DIST_FLOAT16;
  if (text == "bf16") return DIST_BFLOAT16;
  if (text == "int") return DIST_INT32;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --dtype '", text, "'; use one of ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<dist_reduce_op_t> ParseRedop(absl::string_view text) {
  std::vector<std::string> names;
  for (int i = 0; i < DIST_REDUCE_OP_COUNT; ++i) {
    const auto redop = static_cast<dist_reduce_op_t>(i);
    if (text == dist_reduce_op_name(redop)) return redop;
    names.push_back(dist_reduce_op_name(redop));
  }
  if (text == "prod") return DIST_PRODUCT;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --redop '", text, "'; use one of ", absl::StrJoin(names, ", ")));
}

double BusBandwidthFactor(const OpInfo& op, int world_size) {
  const double w = world_size;
  switch (op.op) {
    case Op::kAllReduce:
      return 2.0 * (w - 1) / w;
    case Op::kAllGather:
    case Op::kReduceScatter:
    case Op::kAllToAll:
    case Op::kGather:
    case Op::kScatter:
      return (w - 1) / w;
    case Op::kBroadcast:
    case Op::kReduce:
    case Op::kSendRecv:
      return 1.0;
    case Op::kBarrier:
      return 0.0;
  }
  return 1.0;
}

uint64_t BlockForBytes(const OpInfo& op, dist_dtype_t dtype, int world_size, uint64_t bytes) {
  if (op.op == Op::kBarrier) return 0;
  const uint64_t blocks = (op.send_per_rank || op.recv_per_rank) ? world_size : 1;
  return bytes / (blocks * dist_dtype_size(dtype));
}

uint64_t RingShiftBytes(const Case& c) {
  return static_cast<uint64_t>(
      std::llround(static_cast<double>(c.bytes()) * BusBandwidthFactor(*c.op, c.world_size)));
}

std::vector<uint64_t> SweepSizes(uint64_t min_bytes, uint64_t max_bytes, uint64_t factor) {
  std::vector<uint64_t> sizes;
  for (uint64_t size = min_bytes; size <= max_bytes; size *= factor) {
    sizes.push_back(size);
    if (size == 0 || size > max_bytes / factor) break;
  }
  return sizes;
}

}  // namespace distbench

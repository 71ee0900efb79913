#include "plugins/backends/gloo/variable_counts.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "gloo/allgatherv.h"
#include "gloo/alltoall.h"
#include "gloo/alltoallv.h"
#include "plugins/backends/gloo/buffers.h"

namespace dist_gloo {
namespace {

// gloo::alltoallv counts in int64_t; both count bytes here (char buffers).
constexpr uint64_t kMaxBytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

const char* NameOf(dist_collective_t kind) {
  return kind == DIST_COLL_ALL_TO_ALL ? "all_to_all_v" : "all_gather_v";
}

// The Gloo tag of one step: the hash of what must agree between ranks, as
// MatchTag has for the fixed-count operations (op.h), so that ranks that
// disagree wait on different slots and time out instead of writing past a
// receive. `agreed`: counts every rank holds alike (all_gather_v's).
uint32_t VariableTag(const Op& op, uint64_t step, const std::vector<uint64_t>& agreed) {
  TagHash hash;
  hash.Mix(static_cast<uint64_t>(op.kind));
  hash.Mix(0x76);  // 'v': not the fixed-count operation of the same kind
  hash.Mix(step);
  hash.Mix(static_cast<uint64_t>(op.args.send.dtype));
  for (uint64_t count : agreed) hash.Mix(count);
  return hash.Tag();
}

// Whether the blocks lie back to back in rank order from element 0: the
// only layout Gloo's algorithms take (they have no displacements).
bool Packed(const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs) {
  uint64_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (displs[r] != at) return false;
    at += counts[r];
  }
  return true;
}

bool Overlap(const dist_buffer_t& a, const dist_buffer_t& b) {
  const char* a0 = static_cast<const char*>(a.data);
  const char* b0 = static_cast<const char*>(b.data);
  const size_t a_bytes = Bytes(a.dtype, a.count);
  const size_t b_bytes = Bytes(b.dtype, b.count);
  return a_bytes > 0 && b_bytes > 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

std::chrono::milliseconds Left(std::chrono::steady_clock::time_point deadline) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now()),
                  std::chrono::milliseconds(1));
}

// Gloo reads its buffers' pointers even for zero bytes (memcpy of its own
// block): a real address where the caller's buffer has none.
char* NonNull(char* data) {
  static char nothing;
  return data != nullptr ? data : &nothing;
}

// The blocks of `buffer` that `counts`/`displs` name, checked as the core
// does (a caller of the table directly may not have) and against what Gloo
// can count: every block's end, and the blocks' sum (packed copy), in bytes.
absl::Status CheckBlocks(const std::string& where, const char* which, const dist_buffer_t& buffer,
                         const uint64_t* counts, const uint64_t* displs, int size) {
  if (counts == nullptr || displs == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, which, "_counts or ", which, "_displs is NULL; pass both"));
  }
  const uint64_t max_elements = kMaxBytes / dist_dtype_size(buffer.dtype);
  uint64_t sum = 0;
  for (int r = 0; r < size; ++r) {
    if (displs[r] > buffer.count || counts[r] > buffer.count - displs[r]) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, which, " block of rank ", r, " (", counts[r], " elements at ", displs[r],
          ") ends past the ", which, " buffer's ", buffer.count, " elements"));
    }
    if (displs[r] + counts[r] > max_elements || counts[r] > max_elements - sum) {
      return absl::OutOfRangeError(absl::StrCat(
          where, which, " blocks reach past 2^63-1 bytes, more than Gloo counts; split the call"));
    }
    sum += counts[r];
  }
  if (sum > 0 && buffer.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where, "the ", which, " buffer is NULL"));
  }
  return absl::OkStatus();
}

// all_to_all_v in two steps. First the ranks tell each other their counts
// (one fixed-size gloo::alltoall): Gloo's TCP transport writes a message
// whatever the size of the receive posted for it, and one larger than that
// receive kills the receiving process in Gloo's I/O thread, where no one
// can catch it; the tag cannot guard this, as no rank knows the others'
// counts. Then gloo::alltoallv moves each block both ends agree on (a block
// they disagree on travels as zero bytes on both), so every rank finishes
// and a disagreement is an error on the ranks involved, the communicator
// intact. Layouts Gloo cannot take (displacements, or send sharing memory
// with recv, which Gloo writes while it reads send) go through copies.
absl::Status RunAllToAllV(const Op& op, const OpEnv& env) {
  const VariableCounts& c = *op.counts;
  const dist_op_args_t& a = op.args;
  const int size = env.context->size;
  const size_t element = dist_dtype_size(a.send.dtype);
  const auto deadline = std::chrono::steady_clock::now() + env.timeout;

  std::vector<uint64_t> told(2 * size), heard(2 * size);
  for (int j = 0; j < size; ++j) {
    told[2 * j] = c.send_counts[j];
    told[2 * j + 1] = c.recv_counts[j];
  }
  gloo::AlltoallOptions exchange(env.context);
  exchange.setInput<uint64_t>(told.data(), told.size());
  exchange.setOutput<uint64_t>(heard.data(), heard.size());
  exchange.setTag(VariableTag(op, 1, {}));
  exchange.setTimeout(env.timeout);
  gloo::alltoall(exchange);

  // What both ends of each link agree on. The peers' numbers are only
  // compared, never used to size a buffer.
  std::vector<int64_t> in_bytes(size), out_bytes(size);
  std::string disagreements;
  for (int j = 0; j < size; ++j) {
    const uint64_t j_sends = heard[2 * j], j_expects = heard[2 * j + 1];
    if (c.send_counts[j] == j_expects) {
      in_bytes[j] = static_cast<int64_t>(Bytes(a.send.dtype, c.send_counts[j]));
    } else if (j == env.context->rank) {
      absl::StrAppend(&disagreements, disagreements.empty() ? "" : "; ", "sends itself ",
                      c.send_counts[j], " elements but expects ", j_expects);
    } else {
      absl::StrAppend(&disagreements, disagreements.empty() ? "" : "; ", "sends rank ", j, " ",
                      c.send_counts[j], " elements but rank ", j, " expects ", j_expects);
    }
    if (c.recv_counts[j] == j_sends) {
      out_bytes[j] = static_cast<int64_t>(Bytes(a.recv.dtype, c.recv_counts[j]));
    } else if (j != env.context->rank) {  // its own block was named once above
      absl::StrAppend(&disagreements, disagreements.empty() ? "" : "; ", "expects ",
                      c.recv_counts[j], " elements from rank ", j, ", which sends ", j_sends);
    }
  }
  const bool agreed = disagreements.empty();

  // Gloo's input: send itself, or its blocks packed into a copy.
  char* in = static_cast<char*>(a.send.data);
  std::vector<char> in_copy;
  if (!agreed || !Packed(c.send_counts, c.send_displs) || Overlap(a.send, a.recv)) {
    size_t total = 0;
    for (int64_t bytes : in_bytes) total += static_cast<size_t>(bytes);
    in_copy.resize(total);
    size_t at = 0;
    for (int j = 0; j < size; ++j) {
      if (in_bytes[j] == 0) continue;
      std::memcpy(in_copy.data() + at, At(a.send.data, c.send_displs[j] * element),
                  static_cast<size_t>(in_bytes[j]));
      at += static_cast<size_t>(in_bytes[j]);
    }
    in = in_copy.data();
  }
  // Gloo's output: recv itself, or a packed copy scattered afterwards (left
  // unused after a disagreement: recv stays as it was).
  char* out = static_cast<char*>(a.recv.data);
  std::vector<char> out_copy;
  const bool direct_out = agreed && Packed(c.recv_counts, c.recv_displs);
  if (!direct_out) {
    size_t total = 0;
    for (int64_t bytes : out_bytes) total += static_cast<size_t>(bytes);
    out_copy.resize(total);
    out = out_copy.data();
  }

  gloo::AlltoallvOptions moves(env.context);
  moves.setInput<char>(NonNull(in), in_bytes);
  moves.setOutput<char>(NonNull(out), out_bytes);
  moves.setTag(VariableTag(op, 2, {}));
  moves.setTimeout(Left(deadline));
  gloo::alltoallv(moves);

  if (!agreed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo backend: all_to_all_v #", op.seq, " on rank ", env.context->rank, ": ", disagreements,
        "; recv is left as it was; make rank i's send_counts[j] equal rank j's recv_counts[i]"));
  }
  if (!direct_out) {
    size_t at = 0;
    for (int j = 0; j < size; ++j) {
      if (out_bytes[j] == 0) continue;
      std::memcpy(At(a.recv.data, c.recv_displs[j] * element), out_copy.data() + at,
                  static_cast<size_t>(out_bytes[j]));
      at += static_cast<size_t>(out_bytes[j]);
    }
  }
  return absl::OkStatus();
}

// all_gather_v on gloo::allgatherv, which gathers in rank order with no
// gaps: straight into recv where the displacements are the packed ones,
// else into a packed copy scattered to them afterwards. Every rank holds
// all the counts, so they go into the tag: ranks that disagree time out.
// This rank's block is put in place first and Gloo runs without an input
// (its in-place form), which also covers send overlapping recv.
absl::Status RunAllGatherV(const Op& op, const OpEnv& env) {
  const VariableCounts& c = *op.counts;
  const dist_op_args_t& a = op.args;
  const int size = env.context->size;
  const int rank = env.context->rank;
  const size_t element = dist_dtype_size(a.recv.dtype);
  std::vector<size_t> bytes(size), offsets(size);
  size_t total = 0;
  for (int r = 0; r < size; ++r) {
    bytes[r] = Bytes(a.recv.dtype, c.recv_counts[r]);
    offsets[r] = total;
    total += bytes[r];
  }
  const bool direct = Packed(c.recv_counts, c.recv_displs);
  std::vector<char> copy;
  char* out = static_cast<char*>(a.recv.data);
  if (!direct) {
    copy.resize(total);
    out = copy.data();
  }
  char* mine = out + offsets[rank];
  if (bytes[rank] > 0 && a.send.data != mine) std::memmove(mine, a.send.data, bytes[rank]);

  gloo::AllgathervOptions opts(env.context);
  opts.setOutput<char>(out, bytes);
  opts.setTag(VariableTag(op, 1, c.recv_counts));
  opts.setTimeout(env.timeout);
  gloo::allgatherv(opts);

  if (!direct) {
    for (int r = 0; r < size; ++r) {
      if (bytes[r] > 0)
        std::memcpy(At(a.recv.data, c.recv_displs[r] * element), out + offsets[r], bytes[r]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool RunsVariable(dist_collective_t kind) {
  return kind == DIST_COLL_ALL_TO_ALL || kind == DIST_COLL_ALL_GATHER;
}

absl::StatusOr<std::shared_ptr<const VariableCounts>> CheckVariable(dist_collective_t kind,
                                                                    const dist_op_args_t& args,
                                                                    const dist_op_counts_t& counts,
                                                                    int rank, int size) {
  const std::string where = absl::StrCat("gloo backend: ", NameOf(kind), " on rank ", rank, ": ");
  const dist_buffer_t& send = args.send;
  const dist_buffer_t& recv = args.recv;
  // INVALID_ARGUMENT, not UNIMPLEMENTED: that would hand this rank alone
  // back to the core while the others run here.
  if (send.device.type != DIST_DEVICE_CPU || recv.device.type != DIST_DEVICE_CPU) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "Gloo takes CPU memory only; copy to CPU, or use the nccl backend"));
  }
  if (dist_dtype_size(recv.dtype) == 0 || send.dtype != recv.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(where, "send is ", dist_dtype_name(send.dtype),
                                                   " and recv ", dist_dtype_name(recv.dtype),
                                                   "; pass one known dtype for both"));
  }
  auto copy = std::make_shared<VariableCounts>();
  auto take = [size](const uint64_t* values, std::vector<uint64_t>* into) {
    into->assign(values, values + size);
  };
  if (kind == DIST_COLL_ALL_TO_ALL) {
    if (absl::Status s =
            CheckBlocks(where, "send", send, counts.send_counts, counts.send_displs, size);
        !s.ok()) {
      return s;
    }
    take(counts.send_counts, &copy->send_counts);
    take(counts.send_displs, &copy->send_displs);
  }
  if (absl::Status s =
          CheckBlocks(where, "recv", recv, counts.recv_counts, counts.recv_displs, size);
      !s.ok()) {
    return s;
  }
  take(counts.recv_counts, &copy->recv_counts);
  take(counts.recv_displs, &copy->recv_displs);
  if (kind == DIST_COLL_ALL_GATHER) {
    if (send.count != copy->recv_counts[rank]) {
      return absl::InvalidArgumentError(absl::StrCat(where, "send has ", send.count,
                                                     " elements but recv_counts[", rank, "] is ",
                                                     copy->recv_counts[rank]));
    }
    if (send.count > 0 && send.data == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the send buffer is NULL"));
    }
  }
  return std::shared_ptr<const VariableCounts>(std::move(copy));
}

bool VariableSettled(const Op& op) {
  if (op.kind != DIST_COLL_ALL_GATHER) return false;
  for (uint64_t count : op.counts->recv_counts) {
    if (count > 0) return false;
  }
  return true;
}

absl::Status RunVariableCollective(const Op& op, const OpEnv& env) {
  return op.kind == DIST_COLL_ALL_TO_ALL ? RunAllToAllV(op, env) : RunAllGatherV(op, env);
}

}  // namespace dist_gloo

// dist conformance kit: what several sections of the suite share: the helpers
// of sections.h, RunCase and Suite's own helpers.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dist/cpp/validate.hpp"
#include "sdk/conformance/reference.h"
#include "sdk/conformance/sections.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

// Buffer shapes of dist/backend_plugin.h, in elements.
void Shapes(dist_collective_t coll, uint64_t n, uint64_t world, uint64_t* send, uint64_t* recv) {
  *send = n;
  *recv = n;
  switch (coll) {
    case DIST_COLL_ALL_GATHER:
    case DIST_COLL_GATHER:
      *recv = n * world;
      break;
    case DIST_COLL_SCATTER:
    case DIST_COLL_REDUCE_SCATTER:
      *send = n * world;
      break;
    case DIST_COLL_ALL_TO_ALL:
      *send = *recv = n * world;
      break;
    default:
      break;
  }
}

dist_op_args_t MakeArgs(dist_buffer_t send, dist_buffer_t recv, int64_t timeout_ms) {
  dist_op_args_t a;
  std::memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  a.send = send;
  a.recv = recv;
  a.op = DIST_SUM;
  a.timeout_ms = timeout_ms;
  return a;
}

namespace {

std::string CodeList(const std::vector<absl::StatusCode>& codes) {
  std::vector<std::string> names;
  for (absl::StatusCode c : codes) names.push_back(absl::StatusCodeToString(c));
  return absl::StrJoin(names, " or ");
}

}  // namespace

// Starts and waits; the one place every check's operation goes through.
// Every other call takes the blocking form instead (the table's `run`,
// dist.h's call without a handle), so both paths meet every check, and
// mixed with each other (the same sequence on every rank).
absl::Status StartAndWait(Comm& comm, dist_collective_t coll, const dist_op_args_t& args,
                          int64_t timeout_ms) {
  static std::atomic<uint64_t> calls{0};
  absl::Status status;
  if (calls.fetch_add(1) % 2 == 1) {
    status = comm.Run(coll, args, timeout_ms + kWaitSlackMs);
  } else {
    absl::StatusOr<std::unique_ptr<Work>> work = comm.Start(coll, args);
    if (!work.ok()) return work.status();
    status = (*work)->Wait(timeout_ms + kWaitSlackMs);
  }
  if (absl::IsDeadlineExceeded(status)) {
    return absl::DeadlineExceededError(
        absl::StrCat(dist_collective_name(coll), " did not complete within ",
                     timeout_ms + kWaitSlackMs, " ms: ", status.message()));
  }
  return status;
}

bool NamesRank(const std::string& text, int32_t rank) {
  if (text.find("rank") == std::string::npos) return false;
  const std::string number = absl::StrCat(rank);
  for (size_t at = text.find(number); at != std::string::npos; at = text.find(number, at + 1)) {
    const bool left = at == 0 || !std::isdigit(static_cast<unsigned char>(text[at - 1]));
    const size_t end = at + number.size();
    const bool right = end >= text.size() || !std::isdigit(static_cast<unsigned char>(text[end]));
    if (left && right) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> Filled(dist_device_t device, size_t bytes,
                                                     unsigned char pattern) {
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(device, bytes);
  if (buffer.ok()) std::fill((*buffer)->host().begin(), (*buffer)->host().end(), pattern);
  return buffer;
}

absl::Status Prefix(absl::Status status, const std::string& what) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

absl::Status RunCase(Comm& comm, dist_device_t device, const Case& c, int64_t timeout_ms) {
  const int32_t world = comm.world_size();
  const int32_t me = comm.rank();
  const size_t es = dist_dtype_size(c.dtype);
  const uint64_t n = c.n;
  uint64_t send_count = 0, recv_count = 0;
  Shapes(c.coll, n, world, &send_count, &recv_count);
  const ValueDomain domain{c.dtype, dist::IsReducing(c.coll) ? c.op : std::nullopt, world};
  const bool reducing = dist::IsReducing(c.coll);

  // Buffers: one shared buffer in place, or send + recv (recv pre-filled with
  // a sentinel so that an untouched result shows).
  std::unique_ptr<DeviceBuffer> send_buf, recv_buf;
  dist_buffer_t send = dist_make_buffer(nullptr, send_count, c.dtype, device);
  dist_buffer_t recv = dist_make_buffer(nullptr, recv_count, c.dtype, device);
  DeviceBuffer* result = nullptr;  // the buffer holding recv
  size_t result_offset = 0;        // recv's byte offset in it
  if (c.in_place) {
    const uint64_t total = std::max(send_count, recv_count);
    CONFORMANCE_ASSIGN(buf, Filled(device, total * es, 0xA5));
    switch (c.coll) {
      case DIST_COLL_ALL_GATHER:  // send is this rank's block of recv
        FillInput(domain, c.seed, me, 0, n, buf->host().data() + me * n * es);
        send.data = buf->data(me * n * es);
        recv.data = buf->data();
        break;
      case DIST_COLL_REDUCE_SCATTER:  // recv is this rank's block of send
        FillInput(domain, c.seed, me, 0, send_count, buf->host().data());
        send.data = buf->data();
        recv.data = buf->data(me * n * es);
        result_offset = me * n * es;
        break;
      default:
        FillInput(domain, c.seed, me, 0, n, buf->host().data());
        send.data = recv.data = buf->data();
        break;
    }
    send_buf = std::move(buf);
    result = send_buf.get();
  } else {
    CONFORMANCE_ASSIGN(s, Filled(device, send_count * es, 0));
    CONFORMANCE_ASSIGN(r, Filled(device, recv_count * es, 0xA5));
    FillInput(domain, c.seed, me, 0, send_count, s->host().data());
    send.data = s->data();
    recv.data = r->data();
    send_buf = std::move(s);
    recv_buf = std::move(r);
    result = recv_buf.get();
  }
  CONFORMANCE_RETURN_IF_ERROR(send_buf->Upload());
  if (recv_buf != nullptr) CONFORMANCE_RETURN_IF_ERROR(recv_buf->Upload());

  dist_op_args_t args = MakeArgs(send, recv, timeout_ms);
  args.op = c.op.value_or(DIST_SUM);
  args.root = c.root;
  CONFORMANCE_RETURN_IF_ERROR(StartAndWait(comm, c.coll, args, timeout_ms));
  CONFORMANCE_RETURN_IF_ERROR(result->Download());

  // The expected result, computed locally from every rank's inputs.
  const bool receives =
      !((c.coll == DIST_COLL_REDUCE || c.coll == DIST_COLL_GATHER) && me != c.root);
  if (receives) {
    std::vector<unsigned char> expected(recv_count * es + 1);
    unsigned char* e = expected.data();
    switch (c.coll) {
      case DIST_COLL_ALL_REDUCE:
      case DIST_COLL_REDUCE:
        FillExpectedReduction(domain, c.seed, 0, n, e);
        break;
      case DIST_COLL_REDUCE_SCATTER:
        FillExpectedReduction(domain, c.seed, me * n, n, e);
        break;
      case DIST_COLL_BROADCAST:
        FillInput(domain, c.seed, c.root, 0, n, e);
        break;
      case DIST_COLL_SCATTER:
        FillInput(domain, c.seed, c.root, me * n, n, e);
        break;
      case DIST_COLL_ALL_GATHER:
      case DIST_COLL_GATHER:
        for (int32_t b = 0; b < world; ++b) FillInput(domain, c.seed, b, 0, n, e + b * n * es);
        break;
      case DIST_COLL_ALL_TO_ALL:
        for (int32_t b = 0; b < world; ++b) {
          FillInput(domain, c.seed, b, me * n, n, e + b * n * es);
        }
        break;
      default:
        break;
    }
    CONFORMANCE_RETURN_IF_ERROR(
        Prefix(CompareElements(c.dtype, result->host().data() + result_offset, e, recv_count,
                               reducing ? ReductionTolerance(domain) : 0.0),
               "wrong result"));
  }
  // Out of place, the input must come back untouched.
  if (!c.in_place && send_count > 0) {
    CONFORMANCE_RETURN_IF_ERROR(send_buf->Download());
    std::vector<unsigned char> input(send_count * es);
    FillInput(domain, c.seed, me, 0, send_count, input.data());
    if (std::memcmp(input.data(), send_buf->host().data(), input.size()) != 0) {
      return absl::InternalError("the send buffer was modified by an out-of-place operation");
    }
  }
  return absl::OkStatus();
}

// ---- Helpers ----------------------------------------------------------------

bool Suite::Declared(dist_collective_t coll) const {
  return (plugin_.caps.collectives & (1u << coll)) != 0;
}

bool Suite::DeclaredDtype(dist_dtype_t dtype) const {
  return (plugin_.caps.dtypes & (1u << dtype)) != 0;
}

uint32_t Suite::OpsOf(dist_collective_t coll) const {
  switch (coll) {
    case DIST_COLL_ALL_REDUCE:
      return plugin_.caps.all_reduce_ops;
    case DIST_COLL_REDUCE:
      return plugin_.caps.reduce_ops;
    case DIST_COLL_REDUCE_SCATTER:
      return plugin_.caps.reduce_scatter_ops;
    default:
      return 0;
  }
}

std::vector<dist_dtype_t> Suite::DeclaredDtypes() const {
  std::vector<dist_dtype_t> out;
  for (int d = 0; d < DIST_DTYPE_COUNT; ++d) {
    if (DeclaredDtype(static_cast<dist_dtype_t>(d))) out.push_back(static_cast<dist_dtype_t>(d));
  }
  return out;
}

dist_dtype_t Suite::PreferredDtype() const {
  if (DeclaredDtype(DIST_FLOAT32)) return DIST_FLOAT32;
  const std::vector<dist_dtype_t> all = DeclaredDtypes();
  return all.empty() ? DIST_FLOAT32 : all.front();
}

std::vector<uint64_t> Suite::Sizes(dist_collective_t coll, dist_dtype_t dtype) const {
  const uint64_t bytes = options_.quick ? options_.quick_large_bytes : options_.large_bytes;
  // "Large" is the total of the biggest buffer, so n*W-shaped ones divide.
  const bool wide = coll == DIST_COLL_ALL_GATHER || coll == DIST_COLL_GATHER ||
                    coll == DIST_COLL_SCATTER || coll == DIST_COLL_REDUCE_SCATTER ||
                    coll == DIST_COLL_ALL_TO_ALL;
  uint64_t large = bytes / dist_dtype_size(dtype) / (wide ? comm_.world_size() : 1);
  large = std::max<uint64_t>(large, 2048);
  return {0, 1, 7, 1023, large};
}

std::vector<int32_t> Suite::Roots() const {
  const int32_t world = comm_.world_size();
  std::vector<int32_t> roots;
  if (options_.quick) {
    roots.push_back(0);
    if (world > 1) roots.push_back(world - 1);
  } else {
    for (int32_t r = 0; r < world; ++r) roots.push_back(r);
  }
  return roots;
}

void Suite::Record(const std::string& check, const std::string& dtype, const std::string& op,
                   const std::string& size, const absl::Status& status) {
  Row row{check,
          dtype,
          op,
          size,
          status.ok() ? Outcome::kPass : Outcome::kFail,
          status.ok() ? "" : status.ToString()};
  if (!status.ok()) {
    std::fprintf(stderr, "[conformance r%d] FAIL %s %s %s %s: %s\n", comm_.rank(), check.c_str(),
                 dtype.c_str(), op.c_str(), size.c_str(), status.ToString().c_str());
  }
  report_.Add(std::move(row));
}

void Suite::Skip(const std::string& check, const std::string& why) {
  report_.Add(Row{check, "-", "-", "-", Outcome::kSkip, why});
}

absl::Status Suite::ExpectFailure(Comm& comm, dist_collective_t coll, const dist_op_args_t& args,
                                  const std::vector<absl::StatusCode>& codes) {
  absl::Status status;
  absl::StatusOr<std::unique_ptr<Work>> work = comm.Start(coll, args);
  if (!work.ok()) {
    status = work.status();
  } else {
    status = (*work)->Wait(options_.op_timeout_ms + kWaitSlackMs);
    if (absl::IsDeadlineExceeded(status)) {
      stuck_ = absl::StrCat("an invalid ", dist_collective_name(coll), " never completed");
      return absl::DeadlineExceededError(
          absl::StrCat("expected an error, but the operation hung: ", status.message()));
    }
  }
  if (status.ok()) return absl::InternalError("succeeded, but must fail");
  if (!codes.empty() && std::find(codes.begin(), codes.end(), status.code()) == codes.end()) {
    return absl::InternalError(
        absl::StrCat("failed with ", status.ToString(), "; want ", CodeList(codes)));
  }
  return absl::OkStatus();
}

void Suite::Sync() {
  if (!stuck_.empty()) return;
  dist_op_args_t a =
      MakeArgs(dist_make_buffer(nullptr, 0, DIST_UINT8, device_),
               dist_make_buffer(nullptr, 0, DIST_UINT8, device_), options_.op_timeout_ms);
  absl::Status status;
  if (Declared(DIST_COLL_BARRIER)) {
    status = StartAndWait(comm_, DIST_COLL_BARRIER, a, options_.op_timeout_ms);
  } else if (Declared(DIST_COLL_ALL_REDUCE)) {
    Case c{DIST_COLL_ALL_REDUCE, PreferredDtype(), DIST_SUM, 1, 0, false, NextSeed()};
    status = RunCase(comm_, device_, c, options_.op_timeout_ms);
  }
  if (absl::IsDeadlineExceeded(status)) stuck_ = "a synchronizing barrier never completed";
}

}  // namespace dist::conformance

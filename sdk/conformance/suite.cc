#include "sdk/conformance/suite.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/validate.hpp"
#include "sdk/conformance/reference.h"

namespace dist::conformance {
namespace {

constexpr dist_collective_t kReducing[] = {DIST_COLL_ALL_REDUCE, DIST_COLL_REDUCE,
                                           DIST_COLL_REDUCE_SCATTER};
constexpr dist_collective_t kMoving[] = {DIST_COLL_BROADCAST, DIST_COLL_ALL_GATHER,
                                         DIST_COLL_GATHER, DIST_COLL_SCATTER, DIST_COLL_ALL_TO_ALL};
// Extra time a wait gets beyond the operation's own timeout, so that the
// backend's timeout error (which names the culprit) arrives first.
constexpr int64_t kWaitSlackMs = 10000;

bool HasInPlace(dist_collective_t coll) {
  return coll == DIST_COLL_ALL_REDUCE || coll == DIST_COLL_BROADCAST || coll == DIST_COLL_REDUCE ||
         coll == DIST_COLL_ALL_GATHER || coll == DIST_COLL_REDUCE_SCATTER;
}

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

std::string OpName(const std::optional<dist_reduce_op_t>& op) {
  return op.has_value() ? dist_reduce_op_name(*op) : "-";
}

std::string CodeList(const std::vector<absl::StatusCode>& codes) {
  std::vector<std::string> names;
  for (absl::StatusCode c : codes) names.push_back(absl::StatusCodeToString(c));
  return absl::StrJoin(names, " or ");
}

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

absl::StatusOr<std::unique_ptr<DeviceBuffer>> Filled(dist_device_t device, size_t bytes,
                                                     unsigned char pattern) {
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer = DeviceBuffer::Allocate(device, bytes);
  if (buffer.ok()) std::fill((*buffer)->host().begin(), (*buffer)->host().end(), pattern);
  return buffer;
}

#define CONFORMANCE_ASSIGN(lhs, expr)           \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

#define CONFORMANCE_RETURN_IF_ERROR(expr)                      \
  do {                                                         \
    absl::Status conformance_status_ = (expr);                 \
    if (!conformance_status_.ok()) return conformance_status_; \
  } while (0)

absl::Status Prefix(absl::Status status, const std::string& what) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace

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

Suite::Suite(Comm& comm, const LoadedPlugin& plugin, const SuiteOptions& options, Report& report)
    : comm_(comm), plugin_(plugin), options_(options), report_(report) {
  device_ = dist_cpu();
  if ((plugin_.caps.device_types & (1u << DIST_DEVICE_CPU)) == 0) {
    absl::StatusOr<int> count = CudaDeviceCount();
    device_ = dist_cuda(count.ok() && *count > 0 ? comm_.rank() % *count : 0);
  }
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

// ---- The checks -------------------------------------------------------------

const std::vector<std::string>& SectionNames() {
  static const auto* names = new std::vector<std::string>{
      "declared",  "matrix", "p2p",   "barrier", "async",      "work",
      "subgroups", "errors", "rules", "abort",   "mismatched", "peer_death"};
  return *names;
}

void Suite::Run() {
  const std::vector<std::pair<std::string, void (Suite::*)()>> sections = {
      {"declared", &Suite::DeclaredEntries},
      {"matrix", &Suite::CollectiveMatrix},
      {"p2p", &Suite::PointToPoint},
      {"barrier", &Suite::Barrier},
      {"async", &Suite::AsyncOrdering},
      {"work", &Suite::WorkSemantics},
      {"subgroups", &Suite::Subgroups},
      {"errors", &Suite::ErrorPaths},
      {"rules", &Suite::SharedRules},
      {"abort", &Suite::AbortCheck},
      {"mismatched", &Suite::MismatchedCounts},
      {"peer_death", &Suite::PeerDeath},  // last: a rank exits in it
  };
  for (const auto& [name, run] : sections) {
    if (std::find(options_.skip_sections.begin(), options_.skip_sections.end(), name) !=
        options_.skip_sections.end()) {
      Skip(name, "skipped by --skip_sections");
      continue;
    }
    report_.Note(name);
    (this->*run)();
  }
}

void Suite::DeclaredEntries() {
  // Declared == present: a declared operation must have an entry in the table.
  for (int c = 0; c < DIST_COLLECTIVE_COUNT; ++c) {
    const auto coll = static_cast<dist_collective_t>(c);
    if (!Declared(coll)) continue;
    Record(absl::StrCat("declared ", dist_collective_name(coll), " has an entry"), "-", "-", "-",
           comm_.HasOperation(coll)
               ? absl::OkStatus()
               : absl::InternalError("declared in the capabilities, but NULL in the table"));
  }
  if ((plugin_.caps.flags & DIST_CAP_STREAM_WAIT) != 0 && !options_.through_core) {
    Record("declared stream wait has work_wait_stream", "-", "-", "-",
           plugin_.has_work_wait_stream && plugin_.table->work_wait_stream != nullptr
               ? absl::OkStatus()
               : absl::InternalError("DIST_CAP_STREAM_WAIT declared, but work_wait_stream is "
                                     "NULL or beyond the table's struct_size"));
  }
}

void Suite::CollectiveMatrix() {
  std::vector<dist_collective_t> colls(std::begin(kReducing), std::end(kReducing));
  colls.insert(colls.end(), std::begin(kMoving), std::end(kMoving));
  for (dist_collective_t coll : colls) {
    if (!Declared(coll)) continue;
    for (dist_dtype_t dtype : DeclaredDtypes()) {
      std::vector<std::optional<dist_reduce_op_t>> ops;
      if (dist::IsReducing(coll)) {
        for (int o = 0; o < DIST_REDUCE_OP_COUNT; ++o) {
          const auto op = static_cast<dist_reduce_op_t>(o);
          if ((OpsOf(coll) & (1u << op)) == 0) continue;
          if (dist::IsBitwise(op) && dist_dtype_is_floating(dtype)) continue;  // an error path
          ops.push_back(op);
        }
      } else {
        ops.push_back(std::nullopt);
      }
      const std::vector<int32_t> roots = dist::IsRooted(coll) ? Roots() : std::vector<int32_t>{0};
      for (const auto& op : ops) {
        for (uint64_t n : Sizes(coll, dtype)) {
          for (int32_t root : roots) {
            for (bool in_place : {false, true}) {
              if (in_place && !HasInPlace(coll)) continue;
              Case c{coll, dtype, op, n, root, in_place, NextSeed()};
              std::string check = dist_collective_name(coll);
              if (dist::IsRooted(coll)) absl::StrAppend(&check, " root=", root);
              absl::StrAppend(&check, in_place ? " in-place" : " out-of-place");
              absl::Status status = stuck_.empty()
                                        ? RunCase(comm_, device_, c, options_.op_timeout_ms)
                                        : absl::AbortedError(absl::StrCat("not run: ", stuck_));
              if (absl::IsDeadlineExceeded(status)) stuck_ = check + " never completed";
              Record(check, dist_dtype_name(dtype), OpName(op), absl::StrCat(n), status);
            }
          }
        }
      }
    }
  }
}

void Suite::PointToPoint() {
  if (!Declared(DIST_COLL_SEND) || !Declared(DIST_COLL_RECV)) {
    Skip("send/recv", "send and recv are not declared");
    return;
  }
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  if (world < 2) {
    Skip("send/recv ring", "needs at least 2 ranks");
    return;
  }
  const int32_t next = (me + 1) % world;
  const int32_t prev = (me + world - 1) % world;
  // A ring: everyone receives from prev and sends to next, several tags in
  // flight at once, matched by tag.
  auto ring = [&](dist_dtype_t dtype, uint64_t n, int tag_count) -> absl::Status {
    const uint64_t seed = NextSeed();
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    const size_t es = dist_dtype_size(dtype);
    const ValueDomain domain{dtype, std::nullopt, world};
    auto tag_of = [](int t) { return t == 0 ? int64_t{7} : int64_t{1000003} * t; };
    std::vector<std::unique_ptr<DeviceBuffer>> in(tag_count), out(tag_count);
    std::vector<std::unique_ptr<Work>> works;
    auto post_recvs = [&]() -> absl::Status {
      for (int t = 0; t < tag_count; ++t) {
        CONFORMANCE_ASSIGN(r, Filled(device_, n * es, 0xA5));
        CONFORMANCE_RETURN_IF_ERROR(r->Upload());
        dist_op_args_t a =
            MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
                     dist_make_buffer(r->data(), n, dtype, device_), options_.op_timeout_ms);
        a.peer = prev;
        a.tag = tag_of(t);
        CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_RECV, a));
        works.push_back(std::move(w));
        in[t] = std::move(r);
      }
      return absl::OkStatus();
    };
    auto post_sends = [&]() -> absl::Status {
      for (int t = 0; t < tag_count; ++t) {
        CONFORMANCE_ASSIGN(s, Filled(device_, n * es, 0));
        FillInput(domain, MixSeed(seed, tag_of(t)), me, 0, n, s->host().data());
        CONFORMANCE_RETURN_IF_ERROR(s->Upload());
        dist_op_args_t a =
            MakeArgs(dist_make_buffer(s->data(), n, dtype, device_),
                     dist_make_buffer(nullptr, 0, dtype, device_), options_.op_timeout_ms);
        a.peer = next;
        a.tag = tag_of(t);
        CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_SEND, a));
        works.push_back(std::move(w));
        out[t] = std::move(s);
      }
      return absl::OkStatus();
    };
    // Operations complete in issue order, so a backend may run them one
    // by one: even ranks send first and odd ranks receive first, which
    // cannot deadlock even then.
    if (me % 2 == 0) {
      CONFORMANCE_RETURN_IF_ERROR(post_sends());
      CONFORMANCE_RETURN_IF_ERROR(post_recvs());
    } else {
      CONFORMANCE_RETURN_IF_ERROR(post_recvs());
      CONFORMANCE_RETURN_IF_ERROR(post_sends());
    }
    for (auto& w : works) {
      absl::Status status = w->Wait(options_.op_timeout_ms + kWaitSlackMs);
      if (absl::IsDeadlineExceeded(status)) stuck_ = "a send/recv never completed";
      CONFORMANCE_RETURN_IF_ERROR(status);
    }
    for (int t = 0; t < tag_count; ++t) {
      CONFORMANCE_RETURN_IF_ERROR(in[t]->Download());
      std::vector<unsigned char> expected(n * es + 1);
      FillInput(domain, MixSeed(seed, tag_of(t)), prev, 0, n, expected.data());
      CONFORMANCE_RETURN_IF_ERROR(
          Prefix(CompareElements(dtype, in[t]->host().data(), expected.data(), n, 0),
                 absl::StrCat("message with tag ", tag_of(t), " from rank ", prev)));
    }
    return absl::OkStatus();
  };
  for (dist_dtype_t dtype : DeclaredDtypes()) {
    for (uint64_t n : Sizes(DIST_COLL_SEND, dtype)) {
      Record("send/recv ring, 2 tags", dist_dtype_name(dtype), "-", absl::StrCat(n),
             ring(dtype, n, 2));
    }
  }
  // Many operations in flight at once (a backend that takes them in
  // batches must run every one: the shm plugin once completed the fifth
  // on of a caller's batch without running them).
  for (uint64_t n : {uint64_t{1}, uint64_t{3000}}) {
    Record("send/recv ring, 7 tags", "float32", "-", absl::StrCat(n), ring(DIST_FLOAT32, n, 7));
  }
  // The same in one call (sendrecv): a ring shift at every size, and a
  // pairwise exchange (send to and receive from the same rank; with an odd
  // world the last rank pairs with rank 0 too, receiving from it only in the
  // ring above).
  for (dist_dtype_t dtype : DeclaredDtypes()) {
    for (uint64_t n : Sizes(DIST_COLL_SEND, dtype)) {
      Record("sendrecv ring", dist_dtype_name(dtype), "-", absl::StrCat(n),
             SendRecvOnce(dtype, n, next, prev));
    }
  }
  const int32_t partner = (me % 2 == 0) ? me + 1 : me - 1;
  if (partner < world) {
    Record("sendrecv exchange", "float32", "-", "1000",
           SendRecvOnce(DIST_FLOAT32, 1000, partner, partner));
  } else {
    // Rank world-1 of an odd world has no partner: it sits this one out
    // (drawing the seed all the others draw, to stay in step with them).
    (void)NextSeed();
    Skip("sendrecv exchange", "the last rank of an odd world has no partner");
  }
}

absl::Status Suite::SendRecvOnce(dist_dtype_t dtype, uint64_t n, int32_t dst, int32_t src) {
  if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
  const size_t es = dist_dtype_size(dtype);
  const int32_t world = comm_.world_size();
  const ValueDomain domain{dtype, std::nullopt, world};
  const uint64_t seed = NextSeed();
  // What each rank sends depends on the rank it goes to as well, so that a
  // message delivered to the wrong rank is caught.
  CONFORMANCE_ASSIGN(s, Filled(device_, n * es, 0));
  FillInput(domain, MixSeed(seed, dst), comm_.rank(), 0, n, s->host().data());
  CONFORMANCE_RETURN_IF_ERROR(s->Upload());
  CONFORMANCE_ASSIGN(r, Filled(device_, n * es, 0xA5));
  CONFORMANCE_RETURN_IF_ERROR(r->Upload());
  dist_op_args_t send =
      MakeArgs(dist_make_buffer(s->data(), n, dtype, device_),
               dist_make_buffer(nullptr, 0, dtype, device_), options_.op_timeout_ms);
  send.peer = dst;
  send.tag = 11;
  dist_op_args_t recv =
      MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
               dist_make_buffer(r->data(), n, dtype, device_), options_.op_timeout_ms);
  recv.peer = src;
  recv.tag = 11;
  absl::Status status = comm_.SendRecv(send, recv, options_.op_timeout_ms + kWaitSlackMs);
  if (absl::IsDeadlineExceeded(status)) stuck_ = "a sendrecv never completed";
  CONFORMANCE_RETURN_IF_ERROR(status);
  CONFORMANCE_RETURN_IF_ERROR(r->Download());
  std::vector<unsigned char> expected(n * es + 1);
  FillInput(domain, MixSeed(seed, comm_.rank()), src, 0, n, expected.data());
  return Prefix(CompareElements(dtype, r->host().data(), expected.data(), n, 0),
                absl::StrCat("sendrecv from rank ", src));
}

void Suite::Barrier() {
  if (!Declared(DIST_COLL_BARRIER)) {
    Skip("barrier", "barrier is not declared");
    return;
  }
  const int32_t world = comm_.world_size();
  dist_op_args_t args =
      MakeArgs(dist_make_buffer(nullptr, 0, DIST_UINT8, device_),
               dist_make_buffer(nullptr, 0, DIST_UINT8, device_), options_.op_timeout_ms);
  auto run = [&]() -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    CONFORMANCE_RETURN_IF_ERROR(
        StartAndWait(comm_, DIST_COLL_BARRIER, args, options_.op_timeout_ms));
    // The last rank arrives 400 ms late; nobody may leave before it arrives.
    constexpr absl::Duration kLate = absl::Milliseconds(400);
    const absl::Time start = absl::Now();
    if (comm_.rank() == world - 1) absl::SleepFor(kLate);
    CONFORMANCE_RETURN_IF_ERROR(
        StartAndWait(comm_, DIST_COLL_BARRIER, args, options_.op_timeout_ms));
    const absl::Duration waited = absl::Now() - start;
    if (world > 1 && waited < kLate / 2) {
      return absl::InternalError(
          absl::StrCat("left the barrier after ", absl::FormatDuration(waited), " while rank ",
                       world - 1, " arrived ", absl::FormatDuration(kLate), " late"));
    }
    return absl::OkStatus();
  };
  Record("barrier waits for the last rank", "-", "-", "-", run());
}

void Suite::AsyncOrdering() {
  if (!Declared(DIST_COLL_ALL_REDUCE) || (OpsOf(DIST_COLL_ALL_REDUCE) & (1u << DIST_SUM)) == 0) {
    Skip("async: many outstanding operations", "all_reduce with sum is not declared");
    return;
  }
  const dist_dtype_t dtype = PreferredDtype();
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const size_t es = dist_dtype_size(dtype);
  constexpr int kOutstanding = 16;
  constexpr uint64_t kN = 1023;
  auto run = [&](bool reverse, bool poll) -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    const ValueDomain domain{dtype, DIST_SUM, world};
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<std::unique_ptr<Work>> works;
    std::vector<uint64_t> seeds;
    for (int i = 0; i < kOutstanding; ++i) {
      seeds.push_back(NextSeed());
      CONFORMANCE_ASSIGN(b, Filled(device_, kN * es, 0));
      FillInput(domain, seeds.back(), me, 0, kN, b->host().data());
      CONFORMANCE_RETURN_IF_ERROR(b->Upload());
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(b->data(), kN, dtype, device_),
                   dist_make_buffer(b->data(), kN, dtype, device_), options_.op_timeout_ms);
      CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_ALL_REDUCE, a));
      works.push_back(std::move(w));
      bufs.push_back(std::move(b));
    }
    const absl::Time deadline =
        absl::Now() + absl::Milliseconds(options_.op_timeout_ms + kWaitSlackMs);
    for (int k = 0; k < kOutstanding; ++k) {
      const int i = reverse ? kOutstanding - 1 - k : k;
      absl::Status status;
      if (poll) {
        bool done = false;
        while (!done) {
          status = works[i]->Test(&done);
          if (!status.ok()) break;
          if (absl::Now() > deadline) {
            stuck_ = "polled work never completed";
            return absl::DeadlineExceededError("work_test never reported done");
          }
          if (!done) std::this_thread::yield();
        }
      } else {
        status = works[i]->Wait(options_.op_timeout_ms + kWaitSlackMs);
        if (absl::IsDeadlineExceeded(status)) stuck_ = "an outstanding all_reduce never completed";
      }
      CONFORMANCE_RETURN_IF_ERROR(Prefix(status, absl::StrCat("operation ", i)));
    }
    for (int i = 0; i < kOutstanding; ++i) {
      CONFORMANCE_RETURN_IF_ERROR(bufs[i]->Download());
      std::vector<unsigned char> expected(kN * es);
      FillExpectedReduction(domain, seeds[i], 0, kN, expected.data());
      CONFORMANCE_RETURN_IF_ERROR(
          Prefix(CompareElements(dtype, bufs[i]->host().data(), expected.data(), kN, 0),
                 absl::StrCat("operation ", i, " of ", kOutstanding)));
    }
    return absl::OkStatus();
  };
  const std::string size = absl::StrCat(kN);
  Record("async: 16 outstanding all_reduce, waited in reverse", dist_dtype_name(dtype), "sum", size,
         run(true, false));
  Record("async: 16 outstanding all_reduce, work_test polled", dist_dtype_name(dtype), "sum", size,
         run(false, true));

  // A handle destroyed before completion: the operation still completes.
  auto destroyed = [&]() -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    const ValueDomain domain{dtype, DIST_SUM, world};
    const uint64_t seed = NextSeed();
    CONFORMANCE_ASSIGN(b, Filled(device_, kN * es, 0));
    FillInput(domain, seed, me, 0, kN, b->host().data());
    CONFORMANCE_RETURN_IF_ERROR(b->Upload());
    dist_op_args_t a =
        MakeArgs(dist_make_buffer(b->data(), kN, dtype, device_),
                 dist_make_buffer(b->data(), kN, dtype, device_), options_.op_timeout_ms);
    { CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_ALL_REDUCE, a)); }  // the handle goes at once
    // A later operation completes after it (issue order).
    Case later{DIST_COLL_ALL_REDUCE, dtype, DIST_SUM, 7, 0, false, NextSeed()};
    CONFORMANCE_RETURN_IF_ERROR(
        Prefix(RunCase(comm_, device_, later, options_.op_timeout_ms), "the later operation"));
    CONFORMANCE_RETURN_IF_ERROR(b->Download());
    std::vector<unsigned char> expected(kN * es);
    FillExpectedReduction(domain, seed, 0, kN, expected.data());
    return Prefix(CompareElements(dtype, b->host().data(), expected.data(), kN, 0),
                  "the operation whose handle was destroyed");
  };
  Record("async: work_destroy before completion", dist_dtype_name(dtype), "sum", size, destroyed());
}

void Suite::WorkSemantics() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  // Waiting again on a finished operation returns its result again.
  if (Declared(DIST_COLL_BARRIER)) {
    auto again = [&]() -> absl::Status {
      if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
                   dist_make_buffer(nullptr, 0, dtype, device_), options_.op_timeout_ms);
      CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_BARRIER, a));
      CONFORMANCE_RETURN_IF_ERROR(w->Wait(options_.op_timeout_ms + kWaitSlackMs));
      CONFORMANCE_RETURN_IF_ERROR(Prefix(w->Wait(0), "second work_wait(0)"));
      bool done = false;
      CONFORMANCE_RETURN_IF_ERROR(Prefix(w->Test(&done), "work_test after completion"));
      if (!done) return absl::InternalError("work_test says not done after work_wait returned OK");
      return absl::OkStatus();
    };
    Record("work_wait/work_test again after completion", "-", "-", "-", again());
  }
  // A receive that cannot complete yet: work_test says not done, work_wait
  // with a short timeout says DEADLINE_EXCEEDED and leaves it pending, and it
  // completes once the message is sent.
  if (!Declared(DIST_COLL_SEND) || !Declared(DIST_COLL_RECV) || world < 2) {
    Skip("work_wait timeout on a pending recv", "needs send/recv and at least 2 ranks");
    return;
  }
  auto pending = [&]() -> absl::Status {
    if (!stuck_.empty()) return absl::AbortedError("not run: " + stuck_);
    constexpr uint64_t kN = 257;
    constexpr int64_t kTag = 4242;
    const ValueDomain domain{dtype, std::nullopt, world};
    const uint64_t seed = NextSeed();
    if (me == 1) {
      absl::SleepFor(absl::Milliseconds(600));
      CONFORMANCE_ASSIGN(s, Filled(device_, kN * es, 0));
      FillInput(domain, seed, me, 0, kN, s->host().data());
      CONFORMANCE_RETURN_IF_ERROR(s->Upload());
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(s->data(), kN, dtype, device_),
                   dist_make_buffer(nullptr, 0, dtype, device_), options_.op_timeout_ms);
      a.peer = 0;
      a.tag = kTag;
      return StartAndWait(comm_, DIST_COLL_SEND, a, options_.op_timeout_ms);
    }
    if (me != 0) return absl::OkStatus();
    CONFORMANCE_ASSIGN(r, Filled(device_, kN * es, 0xA5));
    CONFORMANCE_RETURN_IF_ERROR(r->Upload());
    dist_op_args_t a =
        MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
                 dist_make_buffer(r->data(), kN, dtype, device_), options_.op_timeout_ms);
    a.peer = 1;
    a.tag = kTag;
    CONFORMANCE_ASSIGN(w, comm_.Start(DIST_COLL_RECV, a));
    bool done = true;
    CONFORMANCE_RETURN_IF_ERROR(Prefix(w->Test(&done), "work_test on a pending recv"));
    if (done) return absl::InternalError("work_test says done before the peer sent anything");
    const absl::Time start = absl::Now();
    absl::Status status = w->Wait(50);
    const absl::Duration took = absl::Now() - start;
    if (!absl::IsDeadlineExceeded(status)) {
      return absl::InternalError(absl::StrCat("work_wait(50 ms) on a pending recv returned ",
                                              status.ToString(), "; want DEADLINE_EXCEEDED"));
    }
    if (took > absl::Milliseconds(450)) {
      return absl::InternalError(
          absl::StrCat("work_wait(50 ms) took ", absl::FormatDuration(took)));
    }
    status = w->Wait(options_.op_timeout_ms + kWaitSlackMs);
    if (absl::IsDeadlineExceeded(status)) stuck_ = "a recv never completed";
    CONFORMANCE_RETURN_IF_ERROR(Prefix(status, "waiting again after the timeout"));
    CONFORMANCE_RETURN_IF_ERROR(r->Download());
    std::vector<unsigned char> expected(kN * es);
    FillInput(domain, seed, 1, 0, kN, expected.data());
    return Prefix(CompareElements(dtype, r->host().data(), expected.data(), kN, 0),
                  "the late message");
  };
  Record("work_test/work_wait timeout on a pending recv", dist_dtype_name(dtype), "-", "257",
         pending());
}

void Suite::Subgroups() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const bool declared = (plugin_.caps.flags & DIST_CAP_SUBGROUPS) != 0;
  if (declared && !options_.through_core && plugin_.table->comm_split == nullptr) {
    Record("subgroups: declared DIST_CAP_SUBGROUPS has comm_split", "-", "-", "-",
           absl::InternalError("DIST_CAP_SUBGROUPS declared, but comm_split is NULL"));
  }
  if (!stuck_.empty()) {
    Record("subgroups", "-", "-", "-", absl::AbortedError("not run: " + stuck_));
    return;
  }
  // Every rank but 0 (so members are renumbered), or {0} alone.
  std::vector<int32_t> members;
  for (int32_t r = world > 1 ? 1 : 0; r < world; ++r) members.push_back(r);
  const std::string how = declared || options_.through_core || plugin_.table->comm_split != nullptr
                              ? "comm_split"
                              : "comm_create on members";
  absl::StatusOr<std::unique_ptr<Comm>> sub = comm_.Split(members, "subgroup1");
  const bool member = std::find(members.begin(), members.end(), me) != members.end();
  // One row for membership on every rank (rows line up across ranks).
  absl::Status membership = sub.status();
  if (sub.ok() && !member && *sub != nullptr) {
    membership = absl::InternalError("a non-member got a usable communicator");
  } else if (sub.ok() && member && *sub == nullptr) {
    membership = absl::InternalError("a member got no communicator");
  } else if (sub.ok() && member) {
    const int32_t want_rank = me - members.front();
    if ((*sub)->rank() != want_rank ||
        (*sub)->world_size() != static_cast<int32_t>(members.size())) {
      membership =
          absl::InternalError(absl::StrCat("rank ", (*sub)->rank(), " of ", (*sub)->world_size(),
                                           "; want ", want_rank, " of ", members.size()));
    }
  }
  Record(absl::StrCat("subgroup of ranks ", members.front(), "..", world - 1, " (", how,
                      "): members renumbered, non-members left out"),
         "-", "-", "-", membership);
  if (!sub.ok()) sub = std::unique_ptr<Comm>();
  // The same checks on every rank (members run them on the subgroup), so the
  // row count agrees everywhere.
  const dist_dtype_t dtype = PreferredDtype();
  const uint64_t seed1 = NextSeed();
  const uint64_t seed2 = NextSeed();
  auto on_sub = [&](const Case& c) -> absl::Status {
    if (!membership.ok()) return absl::AbortedError("not run: the subgroup is wrong");
    if (!member) return absl::OkStatus();
    return RunCase(**sub, device_, c, options_.op_timeout_ms);
  };
  if (Declared(DIST_COLL_ALL_REDUCE) && (OpsOf(DIST_COLL_ALL_REDUCE) & (1u << DIST_SUM)) != 0) {
    Record("subgroup: all_reduce over members only", dist_dtype_name(dtype), "sum", "1023",
           on_sub(Case{DIST_COLL_ALL_REDUCE, dtype, DIST_SUM, 1023, 0, false, seed1}));
  }
  if (Declared(DIST_COLL_BROADCAST)) {
    Record("subgroup: broadcast from the subgroup's rank 0", dist_dtype_name(dtype), "-", "1023",
           on_sub(Case{DIST_COLL_BROADCAST, dtype, std::nullopt, 1023, 0, false, seed2}));
  }
  sub->reset();  // subgroups go before the parent is used again
  // The parent still works after the subgroup is gone.
  if (Declared(DIST_COLL_ALL_REDUCE) && (OpsOf(DIST_COLL_ALL_REDUCE) & (1u << DIST_SUM)) != 0) {
    Case c{DIST_COLL_ALL_REDUCE, dtype, DIST_SUM, 7, 0, false, NextSeed()};
    Record("subgroup: parent still works afterwards", dist_dtype_name(dtype), "sum", "7",
           RunCase(comm_, device_, c, options_.op_timeout_ms));
  }
}

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
  (void)es;
}

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

void Suite::AbortCheck() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const std::string reason = "conformance kit aborts this communicator on purpose";
  Sync();
  absl::StatusOr<std::unique_ptr<Comm>> dup = comm_.Duplicate("abort", options_.op_timeout_ms);
  const dist_collective_t later =
      Declared(DIST_COLL_ALL_REDUCE) ? DIST_COLL_ALL_REDUCE : DIST_COLL_BARRIER;
  const bool with_pending = world >= 2 && Declared(DIST_COLL_RECV);
  const std::string pending_row = "abort: pending operation fails with ABORTED";
  const std::string later_row =
      absl::StrCat("abort: later ", dist_collective_name(later), " fails with ABORTED");
  const std::string destroy_row = "abort: comm_destroy of an aborted communicator returns";
  if (!dup.ok()) {
    // The same rows and the same synchronizations as below, so that the
    // ranks stay in step.
    const absl::Status why = Prefix(dup.status(), "creating the communicator to abort");
    Sync();
    if (with_pending) {
      Record(pending_row, "-", "-", "-", why);
      Sync();
    }
    if (Declared(later)) Record(later_row, dist_dtype_name(PreferredDtype()), "-", "16", why);
    Sync();
    Record(destroy_row, "-", "-", "-", why);
    return;
  }
  Comm& c = **dup;
  // Every rank has finished creating it before anyone aborts it (a rank
  // still connecting would see its peer hang up instead).
  Sync();
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  auto aborted = [&](const absl::Status& status, const std::string& what) -> absl::Status {
    if (status.code() != absl::StatusCode::kAborted) {
      return absl::InternalError(
          absl::StrCat(what, " returned ", status.ToString(), "; want ABORTED"));
    }
    if (status.message().find(reason) == std::string::npos) {
      return absl::InternalError(absl::StrCat(what,
                                              " is ABORTED but its message does not carry "
                                              "the abort reason: ",
                                              status.message()));
    }
    return absl::OkStatus();
  };
  // A pending operation is failed by the abort, within the timeout. Rank 0
  // aborts first; the others wait on the main communicator until it has, so
  // that its recv fails because of its own abort, not because a peer left.
  if (with_pending) {
    auto pending = [&]() -> absl::Status {
      if (me != 0) return absl::OkStatus();
      CONFORMANCE_ASSIGN(buf, Filled(device_, 16 * es, 0));
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(nullptr, 0, dtype, device_),
                   dist_make_buffer(buf->data(), 16, dtype, device_), options_.op_timeout_ms);
      a.peer = 1;
      a.tag = 999999;  // never sent
      CONFORMANCE_ASSIGN(w, c.Start(DIST_COLL_RECV, a));
      absl::SleepFor(absl::Milliseconds(100));
      c.Abort(reason);
      const absl::Time start = absl::Now();
      absl::Status status = w->Wait(options_.op_timeout_ms);
      if (absl::IsDeadlineExceeded(status)) {
        return absl::DeadlineExceededError(absl::StrCat("a pending recv was still pending ",
                                                        absl::FormatDuration(absl::Now() - start),
                                                        " after comm_abort"));
      }
      return aborted(status, "the pending recv");
    };
    Record(pending_row, "-", "-", "-", pending());
    Sync();
  }
  c.Abort(reason);  // idempotent on rank 0
  // Later operations fail with ABORTED (at once or at wait).
  if (Declared(later)) {
    auto run = [&]() -> absl::Status {
      CONFORMANCE_ASSIGN(buf, Filled(device_, 16 * es, 0));
      CONFORMANCE_RETURN_IF_ERROR(buf->Upload());
      dist_op_args_t a =
          MakeArgs(dist_make_buffer(buf->data(), 16, dtype, device_),
                   dist_make_buffer(buf->data(), 16, dtype, device_), options_.op_timeout_ms);
      absl::StatusOr<std::unique_ptr<Work>> w = c.Start(later, a);
      if (!w.ok()) return aborted(w.status(), "starting an operation after abort");
      absl::Status status = (*w)->Wait(options_.op_timeout_ms);
      return aborted(status, "an operation after abort");
    };
    Record(later_row, dist_dtype_name(dtype), "-", "16", run());
  }
  Sync();
  const absl::Time start = absl::Now();
  dup->reset();
  const absl::Duration took = absl::Now() - start;
  Record(destroy_row, "-", "-", "-",
         took < absl::Milliseconds(options_.op_timeout_ms + kWaitSlackMs)
             ? absl::OkStatus()
             : absl::DeadlineExceededError(absl::StrCat("took ", absl::FormatDuration(took))));
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

void Suite::MismatchedCounts() {
  const int32_t world = comm_.world_size();
  if (world < 2 || !Declared(DIST_COLL_ALL_REDUCE)) {
    Skip("mismatched counts between ranks", "needs all_reduce and at least 2 ranks");
    return;
  }
  constexpr int64_t kShortTimeoutMs = 3000;
  Sync();  // communicator creation starts together, whatever came before
  absl::StatusOr<std::unique_ptr<Comm>> dup = comm_.Duplicate("mismatch", options_.op_timeout_ms);
  if (!dup.ok()) {
    Sync();
    Record("mismatched counts between ranks: no crash, no hang", "-", "sum", "8/16",
           Prefix(dup.status(), "creating the communicator for the check"));
    return;
  }
  Sync();  // every rank finished creating it
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  std::string outcome;
  auto run = [&]() -> absl::Status {
    // Rank 0 reduces 8 elements, the others 16: an error, or at worst a hang
    // that an abort ends. Never a crash.
    const uint64_t n = comm_.rank() == 0 ? 8 : 16;
    CONFORMANCE_ASSIGN(buf, Filled(device_, 64 * es, 0));
    CONFORMANCE_RETURN_IF_ERROR(buf->Upload());
    dist_op_args_t a = MakeArgs(dist_make_buffer(buf->data(), n, dtype, device_),
                                dist_make_buffer(buf->data(), n, dtype, device_), kShortTimeoutMs);
    absl::StatusOr<std::unique_ptr<Work>> w = (*dup)->Start(DIST_COLL_ALL_REDUCE, a);
    if (!w.ok()) {
      outcome = "error at start: " + w.status().ToString();
      return absl::OkStatus();
    }
    absl::Status status = (*w)->Wait(kShortTimeoutMs + 5000);
    if (!absl::IsDeadlineExceeded(status)) {
      outcome = status.ok() ? "not detected (completed)" : "error: " + status.ToString();
      return absl::OkStatus();
    }
    (*dup)->Abort("conformance kit: mismatched counts did not finish");
    status = (*w)->Wait(kShortTimeoutMs + 5000);
    if (absl::IsDeadlineExceeded(status)) {
      return absl::DeadlineExceededError(
          "mismatched all_reduce neither failed within its timeout nor after comm_abort");
    }
    outcome = "hung until aborted";
    return absl::OkStatus();
  };
  absl::Status status = run();
  (*dup)->Abort("conformance kit: end of the mismatched-counts check");
  dup->reset();
  Row row{"mismatched counts between ranks: no crash, no hang",
          dist_dtype_name(dtype),
          "sum",
          "8/16",
          status.ok() ? Outcome::kPass : Outcome::kFail,
          status.ok() ? outcome : status.ToString()};
  report_.Add(std::move(row));
}

namespace {

// True when `text` names rank `rank` ("rank 3", "ranks 1, 3", "rank(s) [3]").
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

}  // namespace

void Suite::PeerDeath() {
  const int32_t world = comm_.world_size();
  const int32_t me = comm_.rank();
  const std::string row = "peer death: survivors get an error naming the dead rank";
  if (world < 2 || !Declared(DIST_COLL_ALL_REDUCE)) {
    Skip(row, "needs all_reduce and at least 2 ranks");
    return;
  }
  if ((plugin_.caps.flags & DIST_CAP_NEEDS_LAUNCHER) != 0 ||
      std::getenv("OMPI_COMM_WORLD_RANK") != nullptr) {
    Skip(row, "under an MPI launcher a dying rank ends the whole job");
    return;
  }
  // The last rank dies (rank 0 may host the rendezvous store). The others
  // must get an error, not a hang, within the operation's timeout.
  constexpr int64_t kTimeoutMs = 5000;
  const int32_t victim = world - 1;
  Sync();
  absl::StatusOr<std::unique_ptr<Comm>> dup = comm_.Duplicate("peer_death", kTimeoutMs);
  Sync();
  if (!dup.ok()) {
    Record(row, "-", "-", "-", Prefix(dup.status(), "creating the communicator for the check"));
    return;
  }
  if (me == victim) {
    report_.Add(Row{row, "-", "-", "-", Outcome::kPass, "this rank exits abruptly"});
    std::fflush(nullptr);
    _exit(0);  // no destructors, no goodbye: as if killed
  }
  const dist_dtype_t dtype = PreferredDtype();
  const size_t es = dist_dtype_size(dtype);
  std::string seen;  // the survivor's error, for the log
  auto run = [&]() -> absl::Status {
    absl::SleepFor(absl::Milliseconds(200));  // let it die first
    CONFORMANCE_ASSIGN(buf, Filled(device_, 1023 * es, 0));
    CONFORMANCE_RETURN_IF_ERROR(buf->Upload());
    dist_op_args_t a = MakeArgs(dist_make_buffer(buf->data(), 1023, dtype, device_),
                                dist_make_buffer(buf->data(), 1023, dtype, device_), kTimeoutMs);
    const absl::Time start = absl::Now();
    absl::Status status;
    absl::StatusOr<std::unique_ptr<Work>> w = (*dup)->Start(DIST_COLL_ALL_REDUCE, a);
    if (!w.ok()) {
      status = w.status();
    } else {
      // The communicator's timeout (or the group's, through the core) bounds it.
      status = (*w)->Wait(std::max(kTimeoutMs, options_.op_timeout_ms) + kWaitSlackMs);
      bool done = true;
      // DEADLINE_EXCEEDED is either the operation's own timeout error (fine:
      // it is done) or this wait giving up on it (not fine).
      if (absl::IsDeadlineExceeded(status)) (void)(*w)->Test(&done);
      if (!done) {
        (*dup)->Abort("conformance kit: all_reduce with a dead peer never ended");
        return absl::DeadlineExceededError(absl::StrCat("all_reduce with rank ", victim,
                                                        " dead was still running after ",
                                                        absl::FormatDuration(absl::Now() - start)));
      }
    }
    if (status.ok()) {
      return absl::InternalError(
          absl::StrCat("all_reduce succeeded although rank ", victim, " is dead"));
    }
    if (!NamesRank(std::string(status.message()), victim)) {
      return absl::InternalError(
          absl::StrCat("the error does not name rank ", victim, ": ", status.ToString()));
    }
    seen =
        absl::StrCat("after ", absl::FormatDuration(absl::Now() - start), ": ", status.ToString());
    return absl::OkStatus();
  };
  const absl::Status status = run();
  (*dup)->Abort("conformance kit: end of the peer-death check");
  dup->reset();
  Record(row, dist_dtype_name(dtype), "sum", "1023", status);
  if (status.ok() && me == 0) {
    std::fprintf(stderr, "[conformance r0] peer death: got the error %s\n", seen.c_str());
  }
  // The main communicator lost a rank too: nothing may use it any more.
  stuck_ = "a rank died on purpose";
}

}  // namespace dist::conformance

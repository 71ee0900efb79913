#include "core/flight_recorder.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/logging.h"
#include "core/own_file.h"
#include "dist/cpp/validate.hpp"
#include "nlohmann/json.hpp"

namespace dist {
namespace {

// Wall-clock microseconds, so that the dumps of different hosts line up.
int64_t NowMicros() { return TraceClock::WallNanos() / 1000; }

constexpr int kAlwaysDumped = 8;
constexpr int64_t kDumpIntervalMicros = 1000000;

// Every live recorder of the process, so that one dump holds all groups of
// a rank (a failure on a subgroup is often explained by the parent's
// history). Leaked on purpose: recorders may die during static destruction.
struct Registry {
  absl::Mutex mu;
  std::vector<FlightRecorder*> recorders ABSL_GUARDED_BY(mu);
};
Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

// The ring's size: the smallest power of two >= capacity, less one.
uint64_t SlotMask(size_t capacity) {
  uint64_t slots = 1;
  while (slots < capacity) slots <<= 1;
  return capacity == 0 ? 0 : slots - 1;
}

}  // namespace

bool IsPointToPoint(dist_collective_t kind) {
  return kind == DIST_COLL_SEND || kind == DIST_COLL_RECV;
}

OpFingerprint MakeFingerprint(dist_collective_t kind, const dist_op_args_t& args,
                              dist_device_type_t device) {
  OpFingerprint fp;
  fp.op = kind;
  fp.device = device;
  // The buffer whose shape every rank shares: scatter and recv are shaped
  // by what arrives, the others by what is sent (dist/backend_plugin.h).
  const dist_buffer_t& shaped =
      kind == DIST_COLL_SCATTER || kind == DIST_COLL_RECV ? args.recv : args.send;
  if (kind != DIST_COLL_BARRIER) {
    fp.dtype = shaped.dtype;
    fp.count = shaped.count;
  }
  if (IsReducing(kind)) fp.reduce = args.op;
  if (IsRooted(kind)) fp.root = args.root;
  if (IsPointToPoint(kind)) {
    fp.peer = args.peer;
    fp.tag = args.tag;
  }
  return fp;
}

std::string DescribeOp(const OpFingerprint& fp) {
  std::string text = absl::StrCat(dist_collective_name(fp.op), "(");
  const char* sep = "";
  if (IsReducing(fp.op)) {
    absl::StrAppend(&text, dist_reduce_op_name(fp.reduce));
    sep = ", ";
  }
  if (IsRooted(fp.op)) {
    absl::StrAppend(&text, sep, "root ", fp.root);
    sep = ", ";
  }
  if (IsPointToPoint(fp.op)) {
    absl::StrAppend(&text, sep, fp.op == DIST_COLL_SEND ? "to " : "from ", fp.peer, ", tag ",
                    fp.tag);
    sep = ", ";
  }
  if (fp.op != DIST_COLL_BARRIER) {
    absl::StrAppend(&text, sep, fp.count, " x ", dist_dtype_name(fp.dtype));
    sep = ", ";
  }
  if (fp.device != DIST_DEVICE_CPU) absl::StrAppend(&text, sep, dist_device_type_name(fp.device));
  return absl::StrCat(text, ")");
}

const char* TraceStateName(TraceState state) {
  switch (state) {
    case TraceState::kIssued:
      return "issued";
    case TraceState::kStarted:
      return "started";
    case TraceState::kCompleted:
      return "completed";
    case TraceState::kFailed:
      return "failed";
    case TraceState::kTimedOut:
      return "timed_out";
  }
  return "unknown";
}

FlightRecorder::FlightRecorder(std::string group, int32_t global_rank, int32_t rank,
                               int32_t world_size, std::string backend, size_t capacity,
                               std::string dir)
    : group_(std::move(group)),
      global_rank_(global_rank),
      rank_(rank),
      world_size_(world_size),
      backend_(std::move(backend)),
      capacity_(capacity),
      dir_(std::move(dir)),
      slot_mask_(SlotMask(capacity)),
      ring_(capacity == 0 ? nullptr : new Entry[slot_mask_ + 1]) {
  if (capacity_ == 0) return;
  Registry& registry = TheRegistry();
  absl::MutexLock lock(&registry.mu);
  registry.recorders.push_back(this);
}

FlightRecorder::~FlightRecorder() {
  if (capacity_ == 0) return;
  Registry& registry = TheRegistry();
  absl::MutexLock lock(&registry.mu);
  auto& list = registry.recorders;
  list.erase(std::remove(list.begin(), list.end(), this), list.end());
}

class FlightRecorder::EntryLock {
 public:
  explicit EntryLock(const Entry& entry) : locked_(entry.locked) {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      // Held for a few stores, or for a dump's copy of the entry: let the
      // holder run (it may share this CPU).
      while (locked_.load(std::memory_order_relaxed)) sched_yield();
    }
  }
  ~EntryLock() { locked_.store(false, std::memory_order_release); }
  EntryLock(const EntryLock&) = delete;
  EntryLock& operator=(const EntryLock&) = delete;

 private:
  std::atomic<bool>& locked_;
};

uint64_t FlightRecorder::Issue(uint64_t seq, const OpFingerprint& fp, bool started) {
  if (capacity_ == 0) return 0;
  const uint64_t now = clock_.Now();
  const uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  Entry& entry = Slot(id);
  EntryLock lock(entry);
  Record& r = entry.record;
  r.id = id;
  r.seq = seq;
  r.fp = fp;
  r.issued = now;
  r.started = started ? now : 0;
  r.ended = 0;
  r.state = started ? TraceState::kStarted : TraceState::kIssued;
  r.error.clear();
  return id;
}

void FlightRecorder::Start(uint64_t id) {
  if (id == 0 || capacity_ == 0) return;
  const uint64_t now = clock_.Now();
  Entry& entry = Slot(id);
  EntryLock lock(entry);
  Record& r = entry.record;
  if (r.id != id) return;  // overwritten since
  r.started = now;
  r.state = TraceState::kStarted;
}

void FlightRecorder::End(uint64_t id, const absl::Status& status) {
  if (id == 0 || capacity_ == 0) return;
  const uint64_t now = clock_.Now();
  Entry& entry = Slot(id);
  EntryLock lock(entry);
  Record& r = entry.record;
  if (r.id != id || r.ended != 0) return;
  r.ended = now;
  if (status.ok()) {
    r.state = TraceState::kCompleted;
  } else {
    r.state = status.code() == absl::StatusCode::kDeadlineExceeded ? TraceState::kTimedOut
                                                                   : TraceState::kFailed;
    r.error = std::string(status.message());
  }
}

void FlightRecorder::ToJson(nlohmann::json& out) const {
  const uint64_t next_id = next_id_.load(std::memory_order_acquire);
  const TraceClock::ToWall to_wall = clock_.Converter();
  out["name"] = group_;
  out["rank"] = rank_;
  out["world_size"] = world_size_;
  out["backend"] = backend_;
  out["capacity"] = capacity_;
  out["recorded"] = next_id - 1;
  nlohmann::json entries = nlohmann::json::array();
  const uint64_t first = next_id > capacity_ ? next_id - capacity_ : 1;
  for (uint64_t id = first; id < next_id; ++id) {
    Record entry;
    {
      const Entry& live = Slot(id);
      EntryLock lock(live);
      entry = live.record;
    }
    if (entry.id != id) continue;  // not written yet (its Issue is under way) or reused
    nlohmann::json e;
    e["seq"] = entry.seq;
    e["op"] = dist_collective_name(entry.fp.op);
    if (entry.fp.op != DIST_COLL_BARRIER) {
      e["dtype"] = dist_dtype_name(entry.fp.dtype);
      e["count"] = entry.fp.count;
    }
    if (IsReducing(entry.fp.op)) e["reduce_op"] = dist_reduce_op_name(entry.fp.reduce);
    if (IsRooted(entry.fp.op)) e["root"] = entry.fp.root;
    if (IsPointToPoint(entry.fp.op)) {
      e["peer"] = entry.fp.peer;
      e["tag"] = entry.fp.tag;
    }
    e["device"] = dist_device_type_name(entry.fp.device);
    e["call"] = DescribeOp(entry.fp);
    e["issued_us"] = to_wall.Micros(entry.issued);
    if (entry.started != 0) e["started_us"] = to_wall.Micros(entry.started);
    if (entry.ended != 0) e["ended_us"] = to_wall.Micros(entry.ended);
    e["state"] = TraceStateName(entry.state);
    if (!entry.error.empty()) e["error"] = entry.error;
    entries.push_back(std::move(e));
  }
  out["entries"] = std::move(entries);
}

void FlightRecorder::DumpAfterFailure(const std::string& reason) const {
  if (dir_.empty() || capacity_ == 0) return;
  // A program that keeps calling after its group aborted fails every call
  // at once; rewriting the file each time would cost more than the calls.
  // The first few failures and then one a second are written.
  static std::atomic<int64_t> last_dump_us{0};
  static std::atomic<int> dumps{0};
  const int64_t now = NowMicros();
  if (dumps.fetch_add(1) >= kAlwaysDumped && now - last_dump_us.load() < kDumpIntervalMicros) {
    return;
  }
  last_dump_us = now;
  absl::StatusOr<std::string> written = DumpRank(global_rank_, dir_, "", reason);
  if (written.ok()) {
    LogLine(DIST_LOG_WARN, "trace", absl::StrCat("flight recorder written to ", *written));
  } else {
    LogLine(DIST_LOG_WARN, "trace", std::string(written.status().message()));
  }
}

absl::StatusOr<std::string> FlightRecorder::DumpRank(int32_t global_rank, const std::string& dir,
                                                     const std::string& path,
                                                     const std::string& reason) {
  std::string target = path;
  if (target.empty()) {
    if (dir.empty()) {
      return absl::FailedPreconditionError(
          "no flight recorder dump path: pass one, or set DIST_TRACE_DIR (option trace_dir)");
    }
    target = absl::StrCat(dir, "/rank-", global_rank, ".json");
  }
  nlohmann::json dump;
  dump["format"] = "dist-trace";
  dump["version"] = 1;
  dump["rank"] = global_rank;
  dump["pid"] = static_cast<int64_t>(getpid());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  dump["host"] = host;
  dump["dumped_us"] = NowMicros();
  dump["reason"] = reason;
  nlohmann::json groups = nlohmann::json::array();
  {
    Registry& registry = TheRegistry();
    absl::MutexLock lock(&registry.mu);
    for (const FlightRecorder* recorder : registry.recorders) {
      if (recorder->global_rank_ != global_rank) continue;
      nlohmann::json group;
      recorder->ToJson(group);
      groups.push_back(std::move(group));
    }
  }
  dump["groups"] = std::move(groups);
  // Replaces a dump an earlier run left, never a file of someone else's.
  const absl::Status written = WriteOwnFile(
      target, dump.dump(1) + "\n",
      [](absl::string_view head) { return absl::StrContains(head, "\"format\": \"dist-trace\""); },
      "flight recorder");
  if (!written.ok()) return written;
  return target;
}

}  // namespace dist

#include "tools/distbench/bench.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"
#include "tools/distbench/device_memory.h"
#include "tools/distbench/dist_ops.h"
#include "tools/distbench/group_util.h"
#include "tools/distbench/pattern.h"

namespace distbench {
namespace {

using RunFn = std::function<absl::Status()>;

// Runs the case once on poisoned output and counts wrong elements here.
absl::StatusOr<int64_t> CheckOnce(const Case& c, DeviceBuffer& recv, const RunFn& run,
                                  dist_device_t device) {
  DIST_RETURN_IF_ERROR(recv.CopyFromHost(MakePoisonedRecv(c)));
  DIST_RETURN_IF_ERROR(run());
  DIST_RETURN_IF_ERROR(SynchronizeDevice(device));
  absl::StatusOr<std::vector<char>> host = recv.CopyToHost();
  if (!host.ok()) return host.status();
  return CountWrong(c, *host);
}

// Seconds per iteration of one timed block on this rank.
absl::StatusOr<double> TimeBlock(int iters, const RunFn& run, const RunFn& barrier,
                                 dist_device_t device) {
  DIST_RETURN_IF_ERROR(barrier());
  const absl::Time start = absl::Now();
  for (int i = 0; i < iters; ++i) DIST_RETURN_IF_ERROR(run());
  DIST_RETURN_IF_ERROR(SynchronizeDevice(device));
  return absl::ToDoubleSeconds(absl::Now() - start) / iters;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

absl::StatusOr<Row> Bench::Run(const Case& c) {
  Row row;
  row.c = c;
  const dist_device_t device = options_.device;
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> send =
      DeviceBuffer::Allocate(device, c.send_count() * c.element_size());
  if (!send.ok()) return send.status();
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> recv =
      DeviceBuffer::Allocate(device, c.recv_count() * c.element_size());
  if (!recv.ok()) return recv.status();
  DIST_RETURN_IF_ERROR((*send)->CopyFromHost(MakeSendData(c)));
  void* s = (*send)->data();
  void* r = (*recv)->data();

  const RunFn plugin = [&] { return RunThroughDist(pg_, c, s, r, device); };
  const RunFn plugin_barrier = [&] { return dist::TakeError(dist_barrier(pg_, nullptr)); };
  Baseline* raw_side = nullptr;
  if (baseline_ != nullptr) {
    absl::Status supported = baseline_->Supports(c);
    if (supported.ok()) {
      raw_side = baseline_;
    } else {
      row.raw_skipped = std::string(supported.message());
    }
  }
  const RunFn raw = [&] { return raw_side->Run(c, s, r); };
  const RunFn raw_barrier = [&] { return raw_side->Barrier(); };

  // Correctness, on both sides, before anything is timed.
  if (options_.check) {
    absl::StatusOr<int64_t> wrong = CheckOnce(c, **recv, plugin, device);
    if (!wrong.ok()) return wrong.status();
    absl::StatusOr<double> total = AllReduceDouble(pg_, device, *wrong, DIST_SUM);
    if (!total.ok()) return total.status();
    row.plugin.wrong = static_cast<int64_t>(*total);
    if (raw_side != nullptr) {
      absl::StatusOr<int64_t> raw_wrong = CheckOnce(c, **recv, raw, device);
      if (!raw_wrong.ok()) return raw_wrong.status();
      absl::StatusOr<double> raw_total = AllReduceDouble(pg_, device, *raw_wrong, DIST_SUM);
      if (!raw_total.ok()) return raw_total.status();
      row.raw.emplace().wrong = static_cast<int64_t>(*raw_total);
    }
  }

  for (int i = 0; i < options_.warmup; ++i) {
    DIST_RETURN_IF_ERROR(plugin());
    if (raw_side != nullptr) DIST_RETURN_IF_ERROR(raw());
  }
  std::vector<double> plugin_times;
  std::vector<double> raw_times;
  // A B, B A, A B, ...: alternating which side goes first also cancels
  // order effects (caches, CPU frequency, the other side's leftovers).
  for (int round = 0; round < options_.rounds; ++round) {
    const bool raw_first = raw_side != nullptr && round % 2 == 1;
    for (int turn = 0; turn < (raw_side != nullptr ? 2 : 1); ++turn) {
      const bool raw_turn = (turn == 0) == raw_first;
      absl::StatusOr<double> t = raw_turn
                                     ? TimeBlock(options_.iters, raw, raw_barrier, device)
                                     : TimeBlock(options_.iters, plugin, plugin_barrier, device);
      if (!t.ok()) return t.status();
      (raw_turn ? raw_times : plugin_times).push_back(*t);
    }
  }

  // The slowest rank's time is a round's time: one reduction for all rounds
  // of both sides.
  std::vector<double> times = plugin_times;
  times.insert(times.end(), raw_times.begin(), raw_times.end());
  absl::StatusOr<std::vector<double>> slowest = AllReduceDoubles(pg_, device, times, DIST_MAX);
  if (!slowest.ok()) return slowest.status();
  const size_t rounds = plugin_times.size();
  const std::vector<double> plugin_rounds(slowest->begin(), slowest->begin() + rounds);
  const double factor = BusBandwidthFactor(*c.op, c.world_size);
  auto fill = [&](const std::vector<double>& round_seconds, Measurement& m) {
    const double seconds = Median(round_seconds);
    m.time_us = seconds * 1e6;
    m.algbw = seconds > 0 ? static_cast<double>(c.bytes()) / seconds / 1e9 : 0;
    m.busbw = m.algbw * factor;
  };
  fill(plugin_rounds, row.plugin);
  if (raw_side != nullptr) {
    const std::vector<double> raw_rounds(slowest->begin() + rounds, slowest->end());
    if (!row.raw.has_value()) row.raw.emplace();
    fill(raw_rounds, *row.raw);
    std::vector<double> ratios;
    for (size_t k = 0; k < rounds; ++k) {
      if (raw_rounds[k] > 0) ratios.push_back(plugin_rounds[k] / raw_rounds[k]);
    }
    if (!ratios.empty()) {
      row.time_ratio = Median(ratios);
      // busbw is bytes / time times a constant: its ratio is the inverse.
      row.busbw_ratio =
          c.bytes() > 0 && factor > 0 && row.time_ratio > 0 ? 1.0 / row.time_ratio : 0;
    }
  }
  return row;
}

}  // namespace distbench

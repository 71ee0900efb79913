#include "tools/distbench/bench.h"

#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"
#include "support/device_memory.h"
#include "tools/distbench/ceiling.h"
#include "tools/distbench/dist_ops.h"
#include "tools/distbench/fastest.h"
#include "tools/distbench/group_util.h"
#include "tools/distbench/pattern.h"

namespace distbench {
namespace {

using dist::DeviceBuffer;
using RunFn = std::function<absl::Status()>;

// Runs the case once on poisoned output and counts wrong elements here.
absl::StatusOr<int64_t> CheckOnce(const Case& c, DeviceBuffer& recv, const RunFn& run) {
  const std::vector<char> poisoned = MakePoisonedRecv(c);
  DIST_RETURN_IF_ERROR(recv.CopyIn(poisoned.data(), poisoned.size()));
  DIST_RETURN_IF_ERROR(run());
  std::vector<char> host(recv.bytes());
  DIST_RETURN_IF_ERROR(recv.CopyOut(host.data(), host.size()));  // waits for the device
  return CountWrong(c, host);
}

// Seconds per iteration of one timed block on this rank.
absl::StatusOr<double> TimeBlock(int iters, const RunFn& run, const RunFn& barrier,
                                 dist_device_t device) {
  DIST_RETURN_IF_ERROR(barrier());
  const absl::Time start = absl::Now();
  for (int i = 0; i < iters; ++i) DIST_RETURN_IF_ERROR(run());
  DIST_RETURN_IF_ERROR(dist::SynchronizeDevice(device));
  return absl::ToDoubleSeconds(absl::Now() - start) / iters;
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
  const std::vector<char> send_data = MakeSendData(c);
  DIST_RETURN_IF_ERROR((*send)->CopyIn(send_data.data(), send_data.size()));
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
  std::vector<std::string> variant_names;
  std::vector<RunFn> raws;
  if (raw_side != nullptr) {
    variant_names = raw_side->Variants(c);
    for (size_t v = 0; v < variant_names.size(); ++v) {
      const int index = static_cast<int>(v);
      raws.push_back([&, index] { return raw_side->RunVariant(c, index, s, r); });
    }
  }
  const RunFn raw_barrier = [&] { return raw_side->Barrier(); };
  const size_t variants = raws.size();
  // The ceiling has no barrier of its own: the group's lines it up.
  RunFn ceiling;
  if (ceiling_ != nullptr) {
    absl::Status supported = ceiling_->Supports(c);
    if (supported.ok()) {
      ceiling = [&] { return ceiling_->Run(c); };
    } else {
      row.ceiling_skipped = std::string(supported.message());
    }
  }

  // Correctness, on both sides (every raw variant), before anything is timed.
  if (options_.check) {
    absl::StatusOr<int64_t> wrong = CheckOnce(c, **recv, plugin);
    if (!wrong.ok()) return wrong.status();
    absl::StatusOr<double> total = AllReduceDouble(pg_, device, *wrong, DIST_SUM);
    if (!total.ok()) return total.status();
    row.plugin.wrong = static_cast<int64_t>(*total);
    int64_t raw_wrong_total = 0;
    for (const RunFn& raw : raws) {
      absl::StatusOr<int64_t> raw_wrong = CheckOnce(c, **recv, raw);
      if (!raw_wrong.ok()) return raw_wrong.status();
      absl::StatusOr<double> raw_total = AllReduceDouble(pg_, device, *raw_wrong, DIST_SUM);
      if (!raw_total.ok()) return raw_total.status();
      raw_wrong_total += static_cast<int64_t>(*raw_total);
    }
    if (variants > 0) row.raw.emplace().wrong = raw_wrong_total;
  }

  for (int i = 0; i < options_.warmup; ++i) {
    DIST_RETURN_IF_ERROR(plugin());
    for (const RunFn& raw : raws) DIST_RETURN_IF_ERROR(raw());
    if (ceiling) DIST_RETURN_IF_ERROR(ceiling());
  }
  // sides[0] is the plugin, sides[1 + v] raw variant v, and the last the
  // ceiling when there is one. Each round times every side once, starting
  // at a different side each round (A B C, B C A, ...), so slow phases of
  // a shared machine and order effects hit all.
  const size_t ceiling_side = 1 + variants;
  const size_t sides = 1 + variants + (ceiling ? 1 : 0);
  std::vector<std::vector<double>> side_times(sides);
  for (int round = 0; round < options_.rounds; ++round) {
    for (size_t turn = 0; turn < sides; ++turn) {
      const size_t side = (turn + static_cast<size_t>(round)) % sides;
      absl::StatusOr<double> t =
          side == 0              ? TimeBlock(options_.iters, plugin, plugin_barrier, device)
          : side == ceiling_side ? TimeBlock(options_.iters, ceiling, plugin_barrier, device)
                                 : TimeBlock(options_.iters, raws[side - 1], raw_barrier, device);
      if (!t.ok()) return t.status();
      side_times[side].push_back(*t);
    }
  }

  // The slowest rank's time is a round's time: one reduction for all rounds
  // of every side.
  std::vector<double> times;
  for (const std::vector<double>& t : side_times) times.insert(times.end(), t.begin(), t.end());
  absl::StatusOr<std::vector<double>> slowest = AllReduceDoubles(pg_, device, times, DIST_MAX);
  if (!slowest.ok()) return slowest.status();
  const size_t rounds = static_cast<size_t>(options_.rounds);
  auto rounds_of = [&](size_t side) {
    return std::vector<double>(slowest->begin() + side * rounds,
                               slowest->begin() + (side + 1) * rounds);
  };
  const std::vector<double> plugin_rounds = rounds_of(0);
  const double factor = BusBandwidthFactor(*c.op, c.world_size);
  auto fill = [&](const std::vector<double>& round_seconds, Measurement& m) {
    const double seconds = Median(round_seconds);
    m.time_us = seconds * 1e6;
    m.algbw = seconds > 0 ? static_cast<double>(c.bytes()) / seconds / 1e9 : 0;
    m.busbw = m.algbw * factor;
  };
  fill(plugin_rounds, row.plugin);
  if (variants > 0) {
    // The fastest raw variant is the baseline of this row; each round is
    // compared with the one fastest in the other rounds (fastest.h).
    std::vector<std::vector<double>> variant_rounds;
    for (size_t v = 0; v < variants; ++v) {
      variant_rounds.push_back(rounds_of(1 + v));
      row.raw_variant_us.emplace_back(variant_names[v], Median(variant_rounds.back()) * 1e6);
    }
    const FastestVariant fastest = ChooseFastest(variant_rounds);
    row.raw_variant = variant_names[fastest.overall];
    if (!row.raw.has_value()) row.raw.emplace();
    fill(variant_rounds[fastest.overall], *row.raw);  // the fastest variant's median
    const std::vector<double>& raw_rounds = fastest.round_times;
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
  if (ceiling) {
    const std::vector<double> ceiling_rounds = rounds_of(ceiling_side);
    fill(ceiling_rounds, row.ceiling.emplace());  // busbw: RingShiftBytes / time
    std::vector<double> fractions;
    for (size_t k = 0; k < rounds; ++k) {
      if (plugin_rounds[k] > 0) fractions.push_back(ceiling_rounds[k] / plugin_rounds[k]);
    }
    if (!fractions.empty()) row.ceiling_fraction = Median(fractions);
  }
  return row;
}

}  // namespace distbench

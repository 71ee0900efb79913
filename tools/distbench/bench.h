// Measures one case: correctness first (--check), then warm-up, then timed
// rounds that alternate the plugin, the raw library's variants and the
// loopback TCP ceiling (A B C, B C A, ...), so that slow phases of a shared
// machine and order effects hit every side alike.
#ifndef DIST_TOOLS_DISTBENCH_BENCH_H_
#define DIST_TOOLS_DISTBENCH_BENCH_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dist/dist.h"
#include "tools/distbench/baseline.h"
#include "tools/distbench/collectives.h"

namespace distbench {

class LoopbackCeiling;  // ceiling.h

// The loopback TCP ceiling's name in the table's header and the JSON.
constexpr char kCeilingName[] = "loopback_tcp";

struct BenchOptions {
  int warmup = 5;  // untimed iterations per side
  int iters = 20;  // timed iterations per side and round
  int rounds = 3;  // timed rounds per side; the median round counts
  bool check = false;
  dist_device_t device{DIST_DEVICE_CPU, 0};
};

struct Measurement {
  double time_us = 0;  // per iteration, slowest rank, median round
  double algbw = 0;    // GB/s: bytes / time
  double busbw = 0;    // GB/s: algbw * BusBandwidthFactor
  int64_t wrong = -1;  // elements wrong over all ranks; -1: not checked
};

struct Row {
  Case c;
  Measurement plugin;
  std::optional<Measurement> raw;  // set when the baseline ran
  std::string raw_skipped;         // why not, when a baseline was asked for
  // Which of the raw library's variants `raw` is (the fastest one, by median
  // time), and every variant's median time, in Baseline::Variants order.
  std::string raw_variant;
  std::vector<std::pair<std::string, double>> raw_variant_us;
  // plugin / raw, each the median over rounds of the ratio within a round
  // (A and B measured back to back), so slow phases of the machine cancel.
  double time_ratio = 0;
  double busbw_ratio = 0;
  // The loopback TCP ceiling (--ceiling, ceiling.h), timed in the same
  // rounds; its busbw is RingShiftBytes / time. Unset without it.
  std::optional<Measurement> ceiling;
  std::string ceiling_skipped;  // why not, when a ceiling was asked for
  // plugin busbw / ceiling busbw: the median over rounds of ceiling time /
  // plugin time within a round, as time_ratio.
  double ceiling_fraction = 0;
};

class Bench {
 public:
  // `baseline` and `ceiling` may be null. Borrowed.
  Bench(dist_process_group_t* pg, BenchOptions options, Baseline* baseline,
        LoopbackCeiling* ceiling = nullptr)
      : pg_(pg), options_(options), baseline_(baseline), ceiling_(ceiling) {}

  // Collective over the group.
  absl::StatusOr<Row> Run(const Case& c);

 private:
  dist_process_group_t* pg_;
  BenchOptions options_;
  Baseline* baseline_;
  LoopbackCeiling* ceiling_;
};

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_BENCH_H_

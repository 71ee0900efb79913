// What the flight recorder adds to every operation: Issue + End of one
// entry (what the core does without DIST_DEBUG=detail), with the recorder on
// (2000 entries) and off (0). docs/performance.md ("The flight recorder and
// DIST_DEBUG") quotes it beside distbench's end-to-end comparison.
//   bazel run -c opt //tests/core:flight_recorder_bench
#include "benchmark/benchmark.h"
#include "core/flight_recorder.h"

namespace dist {
namespace {

void BM_RecordOneOperation(benchmark::State& state) {
  FlightRecorder recorder("bench", 0, 0, 2, "shm", static_cast<size_t>(state.range(0)), "");
  OpFingerprint fp;
  fp.op = DIST_COLL_ALL_REDUCE;
  fp.count = 2;
  uint64_t seq = 0;
  for (auto _ : state) {
    recorder.End(recorder.Issue(++seq, fp, /*started=*/true), absl::OkStatus());
  }
}
BENCHMARK(BM_RecordOneOperation)->Arg(0)->Arg(2000);

}  // namespace
}  // namespace dist

BENCHMARK_MAIN();

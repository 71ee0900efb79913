#include "tools/distbench/fastest.h"

#include <algorithm>

namespace distbench {
namespace {

// The variant with the lowest median of its rounds, leaving out round
// `skip` (none when it is out of range); the first one on a tie.
size_t LowestMedian(const std::vector<std::vector<double>>& variant_rounds, size_t skip) {
  size_t best = 0;
  double best_median = 0;
  for (size_t v = 0; v < variant_rounds.size(); ++v) {
    std::vector<double> rounds;
    rounds.reserve(variant_rounds[v].size());
    for (size_t k = 0; k < variant_rounds[v].size(); ++k) {
      if (k != skip) rounds.push_back(variant_rounds[v][k]);
    }
    const double median = Median(rounds);
    if (v == 0 || median < best_median) {
      best = v;
      best_median = median;
    }
  }
  return best;
}

}  // namespace

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

FastestVariant ChooseFastest(const std::vector<std::vector<double>>& variant_rounds) {
  FastestVariant fastest;
  if (variant_rounds.empty()) return fastest;
  const size_t rounds = variant_rounds[0].size();
  fastest.overall = LowestMedian(variant_rounds, rounds);
  for (size_t k = 0; k < rounds; ++k) {
    const size_t chosen = rounds > 1 ? LowestMedian(variant_rounds, k) : fastest.overall;
    fastest.round_times.push_back(variant_rounds[chosen][k]);
  }
  return fastest;
}

}  // namespace distbench

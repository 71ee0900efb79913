// Which raw variant a row compares the plugin with, chosen so that the
// choice does not flatter the raw side.
//
// Picking the variant with the lowest median over all rounds and then
// comparing in those same rounds is biased: with several variants of about
// the same speed (Gloo's legacy classes on synchronous pairs are within a
// few percent of each other), the lowest of several noisy medians is lower
// than any one variant's true time, so the plugin, measured once, looks
// slower than it is (with four equally fast variants, by about one standard
// deviation of a median: 1.03 sigma for normal noise). Here the variant a
// round is compared with is chosen from the *other* rounds (leave one out),
// so a round's own noise never picks its baseline; a variant that is truly
// the fastest still wins every choice.
#ifndef DIST_TOOLS_DISTBENCH_FASTEST_H_
#define DIST_TOOLS_DISTBENCH_FASTEST_H_

#include <cstddef>
#include <vector>

namespace distbench {

double Median(std::vector<double> values);

struct FastestVariant {
  // The variant with the lowest median over all rounds (the name a row
  // shows); the first one on a tie.
  size_t overall = 0;
  // Per round: the time of the variant with the lowest median over the
  // other rounds (the overall one when there is a single round).
  std::vector<double> round_times;
};

// `variant_rounds[v][k]`: variant v's time in round k; every variant has
// the same number of rounds, at least one variant.
FastestVariant ChooseFastest(const std::vector<std::vector<double>>& variant_rounds);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_FASTEST_H_

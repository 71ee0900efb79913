// A PNG of busbw against size, one line per backend and operation (and a
// dashed one per raw baseline), drawn by gnuplot (Debian: gnuplot-nox).
#ifndef DIST_TOOLS_DISTBENCH_PLOT_H_
#define DIST_TOOLS_DISTBENCH_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace distbench {

// `runs` are distbench JSON documents (ToJson / ReadJson). Runs gnuplot from
// PATH, bounded by a timeout; errors name what to install or fix.
absl::Status PlotBusBandwidth(const std::string& png_path, const std::vector<nlohmann::json>& runs);

}  // namespace distbench

#endif  // DIST_TOOLS_DISTBENCH_PLOT_H_

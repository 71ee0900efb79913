// dist conformance kit: the suite's driver (set-up, section order, skipping).
// Each section is in its own file, section_<name>.cc; what they share is in
// sections.h and sections_common.cc.
#include "sdk/conformance/suite.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "support/device_memory.h"

namespace dist::conformance {

Suite::Suite(Comm& comm, const LoadedPlugin& plugin, const SuiteOptions& options, Report& report)
    : comm_(comm), plugin_(plugin), options_(options), report_(report) {
  device_ = dist_cpu();
  if ((plugin_.caps.device_types & (1u << DIST_DEVICE_CPU)) == 0) {
    absl::StatusOr<int> count = CudaDeviceCount();
    device_ = dist_cuda(count.ok() && *count > 0 ? comm_.rank() % *count : 0);
  }
}

// ---- The checks -------------------------------------------------------------

const std::vector<std::string>& SectionNames() {
  static const auto* names = new std::vector<std::string>{
      "declared", "matrix", "p2p",   "barrier", "async",      "work",      "subgroups",
      "counts",   "errors", "rules", "abort",   "mismatched", "peer_death"};
  return *names;
}

void Suite::Run() {
  const std::vector<std::pair<std::string, void (Suite::*)()>> sections = {
      {"declared", &Suite::DeclaredEntries}, {"matrix", &Suite::CollectiveMatrix},
      {"p2p", &Suite::PointToPoint},         {"barrier", &Suite::Barrier},
      {"async", &Suite::AsyncOrdering},      {"work", &Suite::WorkSemantics},
      {"subgroups", &Suite::Subgroups},      {"counts", &Suite::PerRankCounts},
      {"errors", &Suite::ErrorPaths},        {"rules", &Suite::SharedRules},
      {"abort", &Suite::AbortCheck},         {"mismatched", &Suite::MismatchedCounts},
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

}  // namespace dist::conformance

// distinfo --require gloo,mpi,tcp://: is each named backend (or rendezvous
// scheme, written with "://") present and usable here, and if not, why.
#ifndef DIST_TOOLS_DISTINFO_REQUIRE_H_
#define DIST_TOOLS_DISTINFO_REQUIRE_H_

#include <string>
#include <vector>

#include "tools/distinfo/report.h"

namespace dist::distinfo {

struct RequirementResult {
  std::string name;
  bool ok = false;
  std::string detail;  // "missing: ...", "unavailable: no CUDA device", "ok"
};

std::vector<RequirementResult> CheckRequirements(const Report& report,
                                                 const std::vector<std::string>& names);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_REQUIRE_H_

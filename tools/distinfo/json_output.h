// distinfo --json: the same report as nlohmann::ordered_json, for scripts.
#ifndef DIST_TOOLS_DISTINFO_JSON_OUTPUT_H_
#define DIST_TOOLS_DISTINFO_JSON_OUTPUT_H_

#include <vector>

#include "nlohmann/json.hpp"
#include "tools/distinfo/report.h"
#include "tools/distinfo/require.h"
#include "tools/distinfo/selftest.h"

namespace dist::distinfo {

nlohmann::ordered_json ReportToJson(const Report& report);
nlohmann::ordered_json SelftestsToJson(const std::vector<SelftestResult>& results);
nlohmann::ordered_json RequirementsToJson(const std::vector<RequirementResult>& results);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_JSON_OUTPUT_H_

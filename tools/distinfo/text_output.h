// distinfo's human-readable output, in the spirit of ompi_info.
#ifndef DIST_TOOLS_DISTINFO_TEXT_OUTPUT_H_
#define DIST_TOOLS_DISTINFO_TEXT_OUTPUT_H_

#include <string>
#include <vector>

#include "tools/distinfo/report.h"
#include "tools/distinfo/selftest.h"

namespace dist::distinfo {

std::string FormatReport(const Report& report);
std::string FormatSelftests(const std::vector<SelftestResult>& results);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_TEXT_OUTPUT_H_

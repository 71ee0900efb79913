// How a PluginEntry crosses the pipe from the child process that loaded the
// plugin to distinfo: one JSON object per entry, every field kept.
#ifndef DIST_TOOLS_DISTINFO_PLUGIN_WIRE_H_
#define DIST_TOOLS_DISTINFO_PLUGIN_WIRE_H_

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/distinfo/report.h"

namespace dist::distinfo {

nlohmann::json EntryToWire(const PluginEntry& entry);
// Fails on anything EntryToWire did not write.
absl::StatusOr<PluginEntry> EntryFromWire(const nlohmann::json& wire);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_PLUGIN_WIRE_H_

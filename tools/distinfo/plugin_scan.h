// Loads and probes the plugins in child processes, so that a plugin that
// crashes (a segfault in its probe, an abort in a constructor) or hangs (a
// wedged driver) is reported as broken instead of taking distinfo down.
//
// First one child lists them all through the core (dist_list_plugins), which
// gives exactly what dist_init would see. Only if that child dies or hangs,
// each plugin file is loaded alone in a child of its own, to find the one(s)
// at fault; the others are then described from what loading each alone gave.
#ifndef DIST_TOOLS_DISTINFO_PLUGIN_SCAN_H_
#define DIST_TOOLS_DISTINFO_PLUGIN_SCAN_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tools/distinfo/report.h"

namespace dist::distinfo {

struct PluginScan {
  std::vector<PluginEntry> backends;
  std::vector<PluginEntry> rendezvous;
  std::string list_error;      // dist_list_plugins returned an error
  std::string isolation_note;  // see Report::isolation_note
};

// `search_path` is dist_plugin_search_path()'s list; each child gets
// `timeout` (so a hang costs at most twice that).
PluginScan ScanPlugins(const std::vector<std::string>& search_path, absl::Duration timeout);

}  // namespace dist::distinfo

#endif  // DIST_TOOLS_DISTINFO_PLUGIN_SCAN_H_

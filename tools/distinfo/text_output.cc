#include "tools/distinfo/text_output.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dist/backend_plugin.h"
#include "dist/rendezvous_plugin.h"

namespace dist::distinfo {
namespace {

void Field(std::string& out, absl::string_view label, absl::string_view value) {
  absl::StrAppendFormat(&out, "    %-20s %s\n", absl::StrCat(label, ":"),
                        value.empty() ? "-" : value);
}

std::string Words(const std::vector<std::string>& words) {
  return words.empty() ? "none" : absl::StrJoin(words, " ");
}

std::string StatusLine(const PluginEntry& entry) {
  std::string line = absl::StrCat("  ", entry.name, ": ", StatusWord(entry));
  if (!entry.reason.empty()) absl::StrAppend(&line, ": ", entry.reason);
  return line + "\n";
}

void FormatBackend(std::string& out, const PluginEntry& b) {
  out += StatusLine(b);
  Field(out, "Path", b.path);
  if (b.abi_major != 0 || b.abi_minor != 0) {
    Field(out, "ABI", absl::StrCat(b.abi_major, ".", b.abi_minor));
  }
  if (!b.version.empty()) Field(out, "Version", b.version);
  if (!b.library_version.empty()) Field(out, "Library", b.library_version);
  if (!b.has_capabilities) return;
  const dist_backend_capabilities_t& c = b.capabilities;
  Field(out, "Devices", Words(DeviceNames(c.device_types)));
  Field(out, "Dtypes", Words(DtypeNames(c.dtypes)));
  Field(out, "Collectives", Words(CollectiveNames(c.collectives)));
  const struct {
    dist_collective_t collective;
    uint32_t ops;
  } reducing[] = {{DIST_COLL_ALL_REDUCE, c.all_reduce_ops},
                  {DIST_COLL_REDUCE, c.reduce_ops},
                  {DIST_COLL_REDUCE_SCATTER, c.reduce_scatter_ops}};
  for (const auto& r : reducing) {
    if ((c.collectives & (1u << r.collective)) == 0) continue;
    Field(out, absl::StrCat(dist_collective_name(r.collective), " ops"),
          Words(ReduceOpNames(r.ops)));
  }
  Field(out, "Flags", Words(FlagNames(c.flags)));
  if (b.notes.has_value() && !b.notes->empty()) Field(out, "Notes", *b.notes);
}

void FormatRendezvous(std::string& out, const PluginEntry& r) {
  out += StatusLine(r);
  Field(out, "Path", r.path);
  if (r.abi_major != 0 || r.abi_minor != 0) {
    Field(out, "ABI", absl::StrCat(r.abi_major, ".", r.abi_minor));
  }
  if (!r.version.empty()) Field(out, "Version", r.version);
  if (!r.schemes.empty()) {
    std::vector<std::string> urls;
    for (const std::string& s : r.schemes) urls.push_back(s + "://");
    Field(out, "Schemes", absl::StrJoin(urls, " "));
  }
}

std::vector<std::string> UsableNames(const std::vector<PluginEntry>& entries) {
  std::vector<std::string> names;
  for (const PluginEntry& e : entries) {
    if (e.usable()) names.push_back(e.name);
  }
  return names;
}

}  // namespace

std::string FormatReport(const Report& report) {
  std::string out = absl::StrCat("dist ", report.core_version, "\n");
  absl::StrAppendFormat(&out, "  %-22s %d.%d (entry %s)\n",
                        "Backend plugin ABI:", DIST_BACKEND_ABI_MAJOR, DIST_BACKEND_ABI_MINOR,
                        DIST_BACKEND_ENTRY_SYMBOL);
  absl::StrAppendFormat(&out, "  %-22s %d.%d (entry %s)\n",
                        "Rendezvous plugin ABI:", DIST_RENDEZVOUS_ABI_MAJOR,
                        DIST_RENDEZVOUS_ABI_MINOR, DIST_RENDEZVOUS_ENTRY_SYMBOL);
  if (report.search_path.empty()) {
    absl::StrAppendFormat(&out, "  %-22s (none)\n", "Plugin search path:");
  }
  for (size_t i = 0; i < report.search_path.size(); ++i) {
    const SearchDir& dir = report.search_path[i];
    absl::StrAppendFormat(&out, "  %-22s %s (%s%s)\n", i == 0 ? "Plugin search path:" : "",
                          dir.path, dir.origin, dir.exists ? "" : ", does not exist");
  }
  if (!report.list_error.empty()) {
    absl::StrAppend(&out, "\nPlugins could not be listed: ", report.list_error, "\n");
  }
  if (!report.isolation_note.empty()) {
    absl::StrAppend(&out, "\nNote: ", report.isolation_note, "\n");
  }

  std::vector<std::string> usable = UsableNames(report.backends);
  absl::StrAppend(&out, "\nBackends: ", usable.size(), " usable of ", report.backends.size(),
                  usable.empty() ? "" : absl::StrCat(" (", absl::StrJoin(usable, ", "), ")"), "\n");
  for (const PluginEntry& b : report.backends) FormatBackend(out, b);

  std::vector<std::string> schemes;
  for (const PluginEntry& r : report.rendezvous) {
    if (!r.usable()) continue;
    for (const std::string& s : r.schemes) schemes.push_back(s + "://");
  }
  absl::StrAppend(&out, "\nRendezvous: ", UsableNames(report.rendezvous).size(), " usable of ",
                  report.rendezvous.size(),
                  schemes.empty() ? "" : absl::StrCat(" (", absl::StrJoin(schemes, " "), ")"),
                  "\n");
  for (const PluginEntry& r : report.rendezvous) FormatRendezvous(out, r);

  absl::StrAppend(&out, "\nConfiguration (what dist_init would use):\n");
  if (!report.config_error.empty()) {
    absl::StrAppend(&out, "  error: ", report.config_error, "\n");
  }
  size_t key_width = 0, value_width = 0;
  for (const ConfigRow& row : report.config) {
    key_width = std::max(key_width, row.key.size());
    value_width = std::max(value_width, row.value.size());
  }
  value_width = std::min<size_t>(value_width, 24);  // a long path just pushes its source
  for (const ConfigRow& row : report.config) {
    absl::StrAppendFormat(&out, "  %-*s  %-*s  %s\n", key_width, row.key, value_width,
                          row.value.empty() ? "-" : row.value, row.source);
  }
  return out;
}

std::string FormatSelftests(const std::vector<SelftestResult>& results) {
  std::string out =
      "Self-test (2 local ranks per usable backend: verified all_reduce, "
      "broadcast, barrier):\n";
  if (results.empty()) out += "  no usable backend to test\n";
  size_t width = 0;
  for (const SelftestResult& r : results) width = std::max(width, r.backend.size());
  for (const SelftestResult& r : results) {
    absl::StrAppendFormat(&out, "  %-*s  ", width, r.backend);
    if (r.skipped || r.steps.empty()) {  // nothing ran
      absl::StrAppend(&out, r.skipped ? "skip  " : "FAIL  ", r.detail, "\n");
      continue;
    }
    absl::StrAppend(&out, r.passed ? "pass" : "FAIL",
                    absl::StrFormat("  %.2f s", absl::ToDoubleSeconds(r.elapsed)));
    std::vector<std::string> steps;
    for (const SelftestStep& step : r.steps) {
      steps.push_back(step.ok ? absl::StrFormat("%s %.1f ms", step.name, step.ms)
                              : absl::StrCat(step.name, " FAILED"));
    }
    if (!steps.empty()) absl::StrAppend(&out, "  ", absl::StrJoin(steps, ", "));
    if (r.launcher != "local" && !r.launcher.empty()) {
      absl::StrAppend(&out, "  (via ", r.launcher.substr(0, r.launcher.find(' ')), ")");
    }
    if (!r.detail.empty()) absl::StrAppend(&out, "\n", std::string(width + 4, ' '), r.detail);
    out += "\n";
  }
  return out;
}

}  // namespace dist::distinfo

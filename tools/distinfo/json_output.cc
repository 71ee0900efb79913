#include "tools/distinfo/json_output.h"

#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "dist/rendezvous_plugin.h"

namespace dist::distinfo {
namespace {

nlohmann::ordered_json NullIfEmpty(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(text);
}

nlohmann::ordered_json PluginToJson(const PluginEntry& p) {
  nlohmann::ordered_json j = {
      {"name", p.name},
      {"path", p.path},
      {"status", StatusId(p)},
      {"usable", p.usable()},
      {"reason", NullIfEmpty(p.reason)},
      {"abi", p.abi_major == 0 && p.abi_minor == 0
                  ? nlohmann::ordered_json(nullptr)
                  : nlohmann::ordered_json(absl::StrCat(p.abi_major, ".", p.abi_minor))},
      {"abi_major", p.abi_major},
      {"abi_minor", p.abi_minor},
      {"version", NullIfEmpty(p.version)},
  };
  if (p.kind == DIST_PLUGIN_RENDEZVOUS) {
    j["schemes"] = p.schemes;
    return j;
  }
  j["library_version"] = NullIfEmpty(p.library_version);
  if (!p.has_capabilities) {
    j["capabilities"] = nullptr;
    return j;
  }
  const dist_backend_capabilities_t& c = p.capabilities;
  nlohmann::ordered_json ops = nlohmann::ordered_json::object();
  if (c.collectives & (1u << DIST_COLL_ALL_REDUCE))
    ops["all_reduce"] = ReduceOpNames(c.all_reduce_ops);
  if (c.collectives & (1u << DIST_COLL_REDUCE)) ops["reduce"] = ReduceOpNames(c.reduce_ops);
  if (c.collectives & (1u << DIST_COLL_REDUCE_SCATTER)) {
    ops["reduce_scatter"] = ReduceOpNames(c.reduce_scatter_ops);
  }
  j["capabilities"] = {
      {"devices", DeviceNames(c.device_types)},
      {"dtypes", DtypeNames(c.dtypes)},
      {"collectives", CollectiveNames(c.collectives)},
      {"ops", ops},
      {"flags", FlagNames(c.flags)},
      {"notes",
       p.notes.has_value() ? nlohmann::ordered_json(*p.notes) : nlohmann::ordered_json(nullptr)},
  };
  return j;
}

}  // namespace

nlohmann::ordered_json ReportToJson(const Report& report) {
  nlohmann::ordered_json j;
  j["version"] = report.core_version;
  j["abi"] = {
      {"backend", {{"major", DIST_BACKEND_ABI_MAJOR}, {"minor", DIST_BACKEND_ABI_MINOR}}},
      {"rendezvous", {{"major", DIST_RENDEZVOUS_ABI_MAJOR}, {"minor", DIST_RENDEZVOUS_ABI_MINOR}}},
  };
  j["plugin_search_path"] = nlohmann::ordered_json::array();
  for (const SearchDir& dir : report.search_path) {
    j["plugin_search_path"].push_back(
        {{"path", dir.path}, {"origin", dir.origin}, {"exists", dir.exists}});
  }
  j["list_error"] = NullIfEmpty(report.list_error);
  // Only when it happened, so the output of a healthy machine stays as it was.
  if (!report.isolation_note.empty()) j["isolation_note"] = report.isolation_note;
  j["backends"] = nlohmann::ordered_json::array();
  for (const PluginEntry& p : report.backends) j["backends"].push_back(PluginToJson(p));
  j["rendezvous"] = nlohmann::ordered_json::array();
  for (const PluginEntry& p : report.rendezvous) j["rendezvous"].push_back(PluginToJson(p));
  j["config"] = nlohmann::ordered_json::array();
  for (const ConfigRow& row : report.config) {
    j["config"].push_back({{"key", row.key}, {"value", row.value}, {"source", row.source}});
  }
  j["config_error"] = NullIfEmpty(report.config_error);
  return j;
}

nlohmann::ordered_json SelftestsToJson(const std::vector<SelftestResult>& results) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const SelftestResult& r : results) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const SelftestStep& s : r.steps) {
      steps.push_back(
          {{"name", s.name}, {"ok", s.ok}, {"ms", s.ms}, {"error", NullIfEmpty(s.error)}});
    }
    j.push_back({{"backend", r.backend},
                 {"result", r.skipped  ? "skip"
                            : r.passed ? "pass"
                                       : "fail"},
                 {"detail", NullIfEmpty(r.detail)},
                 {"launcher", NullIfEmpty(r.launcher)},
                 {"seconds", absl::ToDoubleSeconds(r.elapsed)},
                 {"steps", steps}});
  }
  return j;
}

nlohmann::ordered_json RequirementsToJson(const std::vector<RequirementResult>& results) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const RequirementResult& r : results) {
    j.push_back({{"name", r.name}, {"ok", r.ok}, {"detail", r.detail}});
  }
  return j;
}

}  // namespace dist::distinfo

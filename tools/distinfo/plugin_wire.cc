#include "tools/distinfo/plugin_wire.h"

#include "absl/strings/str_cat.h"

namespace dist::distinfo {

nlohmann::json EntryToWire(const PluginEntry& entry) {
  const dist_backend_capabilities_t& c = entry.capabilities;
  nlohmann::json wire = {
      {"kind", static_cast<int>(entry.kind)},
      {"name", entry.name},
      {"path", entry.path},
      {"status", static_cast<int>(entry.status)},
      {"reason", entry.reason},
      {"abi_major", entry.abi_major},
      {"abi_minor", entry.abi_minor},
      {"version", entry.version},
      {"library_version", entry.library_version},
      {"has_capabilities", entry.has_capabilities},
      {"capabilities",
       {c.device_types, c.dtypes, c.collectives, c.all_reduce_ops, c.reduce_ops,
        c.reduce_scatter_ops, c.flags}},
      {"notes", entry.notes.has_value() ? nlohmann::json(*entry.notes) : nlohmann::json(nullptr)},
      {"schemes", entry.schemes},
  };
  return wire;
}

absl::StatusOr<PluginEntry> EntryFromWire(const nlohmann::json& wire) {
  // nlohmann reports a wrong type with an exception; keep it in here.
  try {
    PluginEntry entry;
    entry.kind = static_cast<dist_plugin_kind_t>(wire.at("kind").get<int>());
    entry.name = wire.at("name").get<std::string>();
    entry.path = wire.at("path").get<std::string>();
    entry.status = static_cast<dist_plugin_status_t>(wire.at("status").get<int>());
    entry.reason = wire.at("reason").get<std::string>();
    entry.abi_major = wire.at("abi_major").get<uint32_t>();
    entry.abi_minor = wire.at("abi_minor").get<uint32_t>();
    entry.version = wire.at("version").get<std::string>();
    entry.library_version = wire.at("library_version").get<std::string>();
    entry.has_capabilities = wire.at("has_capabilities").get<bool>();
    const std::vector<uint32_t> masks = wire.at("capabilities").get<std::vector<uint32_t>>();
    if (masks.size() != 7) return absl::InvalidArgumentError("capabilities: 7 masks expected");
    dist_backend_capabilities_t& c = entry.capabilities;
    c.struct_size = entry.has_capabilities ? sizeof(c) : 0;
    c.device_types = masks[0];
    c.dtypes = masks[1];
    c.collectives = masks[2];
    c.all_reduce_ops = masks[3];
    c.reduce_ops = masks[4];
    c.reduce_scatter_ops = masks[5];
    c.flags = masks[6];
    c.notes = nullptr;
    if (!wire.at("notes").is_null()) entry.notes = wire.at("notes").get<std::string>();
    entry.schemes = wire.at("schemes").get<std::vector<std::string>>();
    return entry;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad plugin entry from the child: ", e.what()));
  }
}

}  // namespace dist::distinfo

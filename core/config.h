// The effective configuration of dist_init and where each value came from.
//
// Precedence, highest first: explicit argument (dist_init_options_t) >
// environment (DIST_*) > config file (TOML, DIST_CONFIG) > default. Every
// bad value is an error naming the variable or file line and the fix.
#ifndef DIST_CORE_CONFIG_H_
#define DIST_CORE_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "dist/dist.h"
#include "dist/types.h"

namespace dist {

struct ConfigValue {
  std::string value;
  std::string source;  // "argument", "environment (DIST_BACKEND)", ...
};

// One entry of a device map: which backend serves which device type.
// `device` is empty for a bare backend name: it then serves every device
// type it declares.
struct DeviceAssignment {
  std::optional<dist_device_type_t> device;
  std::string backend;  // a name or a path to a .so
};

struct ConfigOption {
  std::string key;
  std::string value;
  std::string source;
};

struct ResolvedConfig {
  ConfigValue backend;
  ConfigValue init_method;
  ConfigValue timeout;  // value in milliseconds, as text
  ConfigValue log_level;
  ConfigValue config_file;        // value empty when none
  ConfigValue debug;              // "off" or "detail" (DIST_DEBUG)
  ConfigValue trace_entries;      // flight recorder ring size (DIST_TRACE_ENTRIES)
  ConfigValue trace_dir;          // where dumps go (DIST_TRACE_DIR); value empty: none
  ConfigValue survival;           // "on" or "off" (DIST_SURVIVAL, option dist.survival)
  ConfigValue failure_detect_ms;  // DIST_FAILURE_DETECT_MS, option dist.failure_detect_ms
  ConfigValue join;               // "on" or "off" (DIST_JOIN, option dist.join)
  ConfigValue hierarchical;       // "auto" or "off" (DIST_HIERARCHICAL, option dist.hierarchical)
  std::vector<ConfigOption> options;

  // Parsed forms.
  std::vector<DeviceAssignment> device_map;
  absl::Duration timeout_duration;
  dist_log_level_t log_level_value = DIST_LOG_WARN;
  bool debug_detail = false;  // compare every operation's fingerprint across ranks
  int64_t trace_entries_value = 2000;
  bool survival_enabled = false;  // heartbeat, detect failed ranks, allow dist_shrink
  absl::Duration failure_detect = absl::Milliseconds(500);  // silent this long: failed
  bool join_enabled = false;  // join a running group through dist_grow (dist.h 1.5)
  // Hierarchical collectives where ranks share hosts (core/host_hierarchy.h).
  bool hierarchical_auto = true;
  int32_t rank = -1;        // explicit only; -1: from the init method
  int32_t world_size = -1;  // explicit only
  std::string group_name = "default";
};

// dist_init_options_t.store (host ABI 1.4) where the struct has the field
// and it is set, else nullptr. With one, the ranks meet through it and
// init_method reads "store://host".
dist_store_t* HostStoreOf(const dist_init_options_t* options);

inline constexpr char kDefaultBackend[] = "gloo";
inline constexpr char kDefaultInitMethod[] = "env://";
inline constexpr absl::Duration kDefaultTimeout = absl::Minutes(5);
inline constexpr int64_t kDefaultTraceEntries = 2000;
inline constexpr int64_t kMaxTraceEntries = 100000;  // ~18 MB per group (131,072 entries)
// The bounds of every timeout dist accepts (DIST_TIMEOUT, timeout_ms
// arguments, per operation): longer ones overflow deadline arithmetic in
// plugins (steady_clock::now() + milliseconds) and wait for nothing useful;
// shorter ones round to 0 ms, which plugins read as "none".
inline constexpr absl::Duration kMinTimeout = absl::Milliseconds(1);
inline constexpr absl::Duration kMaxTimeout = absl::Hours(24 * 30);
inline constexpr int64_t kMaxTimeoutMs = int64_t{30} * 24 * 3600 * 1000;

absl::StatusOr<ResolvedConfig> ResolveConfig(const dist_init_options_t* options);

// "gloo", "/path/libdist-backend-x.so", "cpu:gloo,cuda:nccl".
absl::StatusOr<std::vector<DeviceAssignment>> ParseDeviceMap(absl::string_view text,
                                                             absl::string_view source);

// "30" (seconds), "30s", "500ms", "2m", "1h"; within [kMinTimeout, kMaxTimeout].
absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text, absl::string_view source);

// Flattens the configuration into (key, value, source) rows for distinfo.
std::vector<ConfigOption> ConfigRows(const ResolvedConfig& config);

}  // namespace dist

#endif  // DIST_CORE_CONFIG_H_

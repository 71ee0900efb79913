#include "core/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/logging.h"
#include "core/mpi_flavor.h"
#include "core/scoped_fd.h"
#include "core/toml_text.h"
#include "dist/cpp/status.hpp"
// toml++ 3.3 asserts on some malformed documents (e.g. "[)" as a table
// header) instead of reporting them; without the assertion it reports them,
// as release builds (NDEBUG) of it do. Found by tests/fuzz/config_fuzz.
#define TOML_ASSERT(expr) static_assert(true)
#include "toml++/toml.h"

namespace dist {
namespace {

// What the config file said, before precedence is applied.
struct FileConfig {
  std::string path;
  std::map<std::string, std::string> values;                 // top-level keys
  std::vector<std::pair<std::string, std::string>> options;  // "gloo.ifname" -> value
};

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

std::string EnvSource(const char* name) { return absl::StrCat("environment (", name, ")"); }

bool IsPluginName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '-')) return false;
  }
  return true;
}

std::string TomlScalarToString(const toml::node& node) {
  if (auto s = node.value<std::string>()) return *s;
  if (auto b = node.value_exact<bool>()) return *b ? "true" : "false";
  if (auto i = node.value_exact<int64_t>()) return absl::StrCat(*i);
  if (auto d = node.value_exact<double>()) return absl::StrCat(*d);
  return "";
}

// A config file is a few lines; anything near this is not one.
constexpr uint64_t kMaxConfigBytes = 1 << 20;

absl::StatusOr<FileConfig> LoadConfigFile(const std::string& path) {
  FileConfig file;
  file.path = path;
  // Non-blocking, and checked on the descriptor: a FIFO there blocked
  // open() until something wrote to it (dist_init hung), and /dev/zero or a
  // log file read until memory ran out.
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("config file ", path, " cannot be opened (",
                                            std::strerror(errno),
                                            "); check DIST_CONFIG or the path"));
  }
  const ScopedFd closer(fd);
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config file ", path,
                     " is not a regular file (a FIFO, device or directory); point DIST_CONFIG "
                     "at a TOML file"));
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config file ", path, " is ", info.st_size, " bytes, more than a config file can be (",
        kMaxConfigBytes, "); check DIST_CONFIG or the path"));
  }
  std::string raw(static_cast<size_t>(info.st_size), '\0');
  size_t got = 0;
  while (got < raw.size()) {
    const ssize_t n = read(fd, raw.data() + got, raw.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // shorter than it was: what is there
    got += static_cast<size_t>(n);
  }
  raw.resize(got);
  absl::StatusOr<std::string> text = SafeTomlText(raw, path);
  if (!text.ok()) return text.status();
  toml::table table;
  try {
    table = toml::parse(*text, path);
  } catch (const toml::parse_error& error) {
    const auto& where = error.source().begin;
    std::string description(error.description());
    return absl::InvalidArgumentError(absl::StrCat("config file ", path, " line ", where.line,
                                                   " column ", where.column,
                                                   ": invalid TOML: ", description));
  }
  const std::string usage =
      "known keys: backend, init_method, timeout, log_level, debug, trace_dir, trace_entries, "
      "survival, failure_detect_ms, join, hierarchical, and tables [options] or "
      "[<plugin>] for backend and rendezvous options";
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const auto line = node.source().begin.line;
    const bool numeric =
        name == "timeout" || name == "trace_entries" || name == "failure_detect_ms";
    if (name == "backend" || name == "init_method" || name == "log_level" || name == "timeout" ||
        name == "debug" || name == "trace_dir" || name == "trace_entries" || name == "survival" ||
        name == "join" || name == "failure_detect_ms" || name == "hierarchical") {
      if (!node.is_value() || node.is_array()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config file ", path, " line ", line, ": '", name, "' must be a value"));
      }
      const bool ok =
          node.is_string() || (numeric && node.is_number()) ||
          ((name == "survival" || name == "join" || name == "hierarchical") && node.is_boolean());
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config file ", path, " line ", line, ": '", name, "' must be a string",
            name == "timeout" ? " or a number of seconds"
            : numeric         ? " or a number"
            : name == "survival" || name == "join" || name == "hierarchical" ? " or a boolean"
                                                                             : ""));
      }
      file.values[name] = TomlScalarToString(node);
    } else if (const toml::table* section = node.as_table()) {
      const std::string prefix = name == "options" ? "" : absl::StrCat(name, ".");
      for (const auto& [option_key, option_node] : *section) {
        if (!option_node.is_value()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "config file ", path, " line ", option_node.source().begin.line, ": option '", prefix,
              std::string(option_key.str()), "' must be a string, number or boolean"));
        }
        file.options.emplace_back(absl::StrCat(prefix, std::string(option_key.str())),
                                  TomlScalarToString(option_node));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("config file ", path, " line ", line,
                                                     ": unknown key '", name, "'; ", usage));
    }
  }
  return file;
}

// Picks the value of highest precedence.
ConfigValue Pick(const char* argument, const char* env_name, const FileConfig& file,
                 const std::string& file_key, const std::string& fallback) {
  if (argument != nullptr && *argument != '\0') return {argument, "argument"};
  if (const char* env = Env(env_name)) return {env, EnvSource(env_name)};
  auto it = file.values.find(file_key);
  if (it != file.values.end()) return {it->second, absl::StrCat("config file (", file.path, ")")};
  return {fallback, "default"};
}

// DIST_DEBUG, DIST_TRACE_ENTRIES and DIST_TRACE_DIR (docs: README "When a job hangs").
absl::Status ResolveTraceOptions(const FileConfig& file, ResolvedConfig& config) {
  config.debug = Pick(nullptr, "DIST_DEBUG", file, "debug", "off");
  const std::string debug = absl::AsciiStrToLower(config.debug.value);
  if (debug == "detail") {
    config.debug_detail = true;
  } else if (debug != "off") {
    return absl::InvalidArgumentError(absl::StrCat(config.debug.source, ": debug mode '",
                                                   config.debug.value,
                                                   "' is unknown; use off or detail"));
  }
  config.trace_entries = Pick(nullptr, "DIST_TRACE_ENTRIES", file, "trace_entries",
                              absl::StrCat(kDefaultTraceEntries));
  int64_t entries = 0;
  if (!absl::SimpleAtoi(config.trace_entries.value, &entries) || entries < 0 ||
      entries > kMaxTraceEntries) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.trace_entries.source, ": trace entries '", config.trace_entries.value,
        "' is not a number in [0, ", kMaxTraceEntries, "]; 0 turns the flight recorder off"));
  }
  config.trace_entries_value = entries;
  config.trace_dir = Pick(nullptr, "DIST_TRACE_DIR", file, "trace_dir", "");
  return absl::OkStatus();
}

absl::StatusOr<bool> ParseSwitch(const ConfigValue& setting) {
  const std::string value = absl::AsciiStrToLower(setting.value);
  if (value == "1" || value == "on" || value == "true" || value == "yes") return true;
  if (value == "0" || value == "off" || value == "false" || value == "no" || value.empty()) {
    return false;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(setting.source, ": '", setting.value, "' is not a switch; use 1 or 0 (on/off)"));
}

// A setting that is also an option (dist.<key>): an option passed as an
// argument comes first, then the environment, then the config file (its
// top-level key, or the option in one of its tables), then the default.
ConfigValue PickSetting(const ResolvedConfig& config, const std::string& option_key,
                        const char* env_name, const FileConfig& file, const std::string& file_key,
                        const std::string& fallback) {
  const ConfigOption* from_file = nullptr;
  for (auto it = config.options.rbegin(); it != config.options.rend(); ++it) {
    if (it->key != option_key) continue;
    if (it->source == "argument")
      return {it->value, absl::StrCat("argument (option ", option_key, ")")};
    if (from_file == nullptr) from_file = &*it;
  }
  ConfigValue picked = Pick(nullptr, env_name, file, file_key, fallback);
  if (picked.source == "default" && from_file != nullptr) {
    return {from_file->value, absl::StrCat(from_file->source, " option ", option_key)};
  }
  return picked;
}

// DIST_SURVIVAL and DIST_FAILURE_DETECT_MS (docs/survival.md).
absl::Status ResolveSurvivalOptions(const FileConfig& file, ResolvedConfig& config) {
  config.survival = PickSetting(config, "dist.survival", "DIST_SURVIVAL", file, "survival", "off");
  absl::StatusOr<bool> enabled = ParseSwitch(config.survival);
  if (!enabled.ok()) return enabled.status();
  config.survival_enabled = *enabled;
  config.survival.value = *enabled ? "on" : "off";
  config.failure_detect_ms = PickSetting(config, "dist.failure_detect_ms", "DIST_FAILURE_DETECT_MS",
                                         file, "failure_detect_ms", "500");
  int64_t ms = 0;
  if (!absl::SimpleAtoi(config.failure_detect_ms.value, &ms) || ms < 50 || ms > 600000) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.failure_detect_ms.source, ": '", config.failure_detect_ms.value,
                     "' is not a failure detection bound in milliseconds in [50, 600000]"));
  }
  config.failure_detect = absl::Milliseconds(ms);
  config.join = PickSetting(config, "dist.join", "DIST_JOIN", file, "join", "off");
  absl::StatusOr<bool> join = ParseSwitch(config.join);
  if (!join.ok()) return join.status();
  config.join_enabled = *join;
  config.join.value = *join ? "on" : "off";
  return absl::OkStatus();
}

// DIST_HIERARCHICAL (docs/performance.md, "Several hosts"): auto, or off.
absl::Status ResolveHierarchical(const FileConfig& file, ResolvedConfig& config) {
  config.hierarchical =
      PickSetting(config, "dist.hierarchical", "DIST_HIERARCHICAL", file, "hierarchical", "auto");
  if (absl::AsciiStrToLower(config.hierarchical.value) == "auto") {
    config.hierarchical_auto = true;
  } else {
    // A switch: on is auto (the hierarchy runs where it pays), off is off.
    absl::StatusOr<bool> on = ParseSwitch(config.hierarchical);
    if (!on.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(config.hierarchical.source, ": '", config.hierarchical.value,
                       "' is not a hierarchical setting; use auto or off"));
    }
    config.hierarchical_auto = *on;
  }
  config.hierarchical.value = config.hierarchical_auto ? "auto" : "off";
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text, absl::string_view source) {
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  absl::Duration duration;
  double seconds = 0;
  bool parsed = false;
  if (absl::SimpleAtod(trimmed, &seconds)) {
    duration = absl::Seconds(seconds);
    parsed = true;
  } else {
    parsed = absl::ParseDuration(trimmed, &duration);
  }
  if (!parsed || duration <= absl::ZeroDuration() || duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": timeout '", text,
                     "' is not a positive duration; use seconds (30) or a unit (500ms, 30s, 2m)"));
  }
  if (duration < kMinTimeout || duration > kMaxTimeout) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": timeout '", text,
                     "' is outside [1ms, 30 days]; use seconds (30) or a unit (500ms, 30s, 2m)"));
  }
  return duration;
}

absl::StatusOr<std::vector<DeviceAssignment>> ParseDeviceMap(absl::string_view text,
                                                             absl::string_view source) {
  const std::string usage =
      "use a backend name (gloo), a path to a .so, or a device map (cpu:gloo,cuda:nccl)";
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  if (trimmed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": backend is empty; ", usage));
  }
  std::vector<DeviceAssignment> map;
  const std::vector<std::string> entries = absl::StrSplit(trimmed, ',');
  for (const std::string& raw_entry : entries) {
    const std::string entry(absl::StripAsciiWhitespace(raw_entry));
    DeviceAssignment assignment;
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      if (entries.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": '", entry, "' in device map '", text,
            "' has no device; write device:backend for every entry (cpu:gloo,cuda:nccl)"));
      }
      assignment.backend = entry;
    } else {
      const std::string device = absl::AsciiStrToLower(entry.substr(0, colon));
      assignment.backend = std::string(absl::StripAsciiWhitespace(entry.substr(colon + 1)));
      if (device == "cpu") {
        assignment.device = DIST_DEVICE_CPU;
      } else if (device == "cuda" || device == "gpu") {
        assignment.device = DIST_DEVICE_CUDA;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": unknown device '", device, "' in '", text, "'; devices are cpu and cuda"));
      }
      for (const DeviceAssignment& earlier : map) {
        if (earlier.device == assignment.device) {
          return absl::InvalidArgumentError(absl::StrCat(source, ": device '", device,
                                                         "' appears twice in '", text,
                                                         "'; give each device one backend"));
        }
      }
    }
    const bool is_path = assignment.backend.find('/') != std::string::npos ||
                         absl::EndsWith(assignment.backend, ".so");
    if (!is_path && !IsPluginName(assignment.backend)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": '", assignment.backend, "' is not a backend name; ", usage));
    }
    map.push_back(std::move(assignment));
  }
  return map;
}

dist_store_t* HostStoreOf(const dist_init_options_t* options) {
  if (options == nullptr ||
      options->struct_size < offsetof(dist_init_options_t, store) + sizeof(dist_store_t*)) {
    return nullptr;
  }
  return options->store;
}

absl::StatusOr<ResolvedConfig> ResolveConfig(const dist_init_options_t* options) {
  dist_init_options_t defaults = dist_init_options_default();
  if (options == nullptr) options = &defaults;
  if (options->struct_size < offsetof(dist_init_options_t, options)) {
    return absl::InvalidArgumentError(absl::StrCat("dist_init_options_t.struct_size is ",
                                                   options->struct_size,
                                                   "; start from dist_init_options_default()"));
  }
  // Fields appended later would be read only when struct_size covers them.
  auto has = [&](size_t offset_end) { return options->struct_size >= offset_end; };

  ResolvedConfig config;
  // The config file itself: argument > DIST_CONFIG > none.
  if (options->config_file != nullptr && *options->config_file != '\0') {
    config.config_file = {options->config_file, "argument"};
  } else if (const char* env = Env("DIST_CONFIG")) {
    config.config_file = {env, EnvSource("DIST_CONFIG")};
  } else {
    config.config_file = {"", "default"};
  }
  FileConfig file;
  if (!config.config_file.value.empty()) {
    absl::StatusOr<FileConfig> loaded = LoadConfigFile(config.config_file.value);
    if (!loaded.ok()) return loaded.status();
    file = *std::move(loaded);
  }

  config.backend = Pick(options->backend, "DIST_BACKEND", file, "backend", kDefaultBackend);
  config.init_method =
      Pick(options->init_method, "DIST_INIT_METHOD", file, "init_method", kDefaultInitMethod);
  config.log_level = Pick(nullptr, "DIST_LOG_LEVEL", file, "log_level", "warn");

  // Timeout: the argument is already in milliseconds.
  if (options->timeout_ms > kMaxTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat("argument: timeout_ms ", options->timeout_ms,
                                                   " is longer than 30 days (", kMaxTimeoutMs,
                                                   " ms), the most dist accepts"));
  }
  if (options->timeout_ms > 0) {
    config.timeout = {absl::StrCat(options->timeout_ms), "argument"};
    config.timeout_duration = absl::Milliseconds(options->timeout_ms);
  } else {
    ConfigValue raw = Pick(nullptr, "DIST_TIMEOUT", file, "timeout",
                           absl::StrCat(absl::ToInt64Seconds(kDefaultTimeout)));
    absl::StatusOr<absl::Duration> parsed = ParseTimeout(raw.value, raw.source);
    if (!parsed.ok()) return parsed.status();
    config.timeout_duration = *parsed;
    config.timeout = {absl::StrCat(absl::ToInt64Milliseconds(*parsed)), raw.source};
  }
  if (options->timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat("argument: timeout_ms ", options->timeout_ms,
                                                   " is negative; pass 0 for the default"));
  }

  absl::StatusOr<dist_log_level_t> level = ParseLogLevel(config.log_level.value);
  if (!level.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.log_level.source, ": ", level.status().message()));
  }
  config.log_level_value = *level;

  DIST_RETURN_IF_ERROR(ResolveTraceOptions(file, config));

  absl::StatusOr<std::vector<DeviceAssignment>> map =
      ParseDeviceMap(config.backend.value, config.backend.source);
  if (!map.ok()) return map.status();
  config.device_map = *std::move(map);

  // An MPI backend takes ranks and the store from MPI itself (mpi://) unless
  // an init method was chosen: `DIST_BACKEND=mpi mpirun ...` needs nothing else.
  if (config.init_method.source == "default") {
    for (const DeviceAssignment& assignment : config.device_map) {
      if (!IsMpiName(assignment.backend)) continue;
      config.init_method = {absl::StrCat(assignment.backend, "://"),
                            absl::StrCat("default (backend ", assignment.backend, ")")};
      break;
    }
  }

  if (HostStoreOf(options) != nullptr) {
    config.init_method = {"store://host", "argument (a store from the host)"};
  }
  const std::string& url = config.init_method.value;
  if (url.find("://") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.init_method.source, ": init method '", url,
                     "' is not a URL; use env://, tcp://host:port or file:///path"));
  }

  if (options->world_size > 0) {
    if (options->rank < 0 || options->rank >= options->world_size) {
      return absl::InvalidArgumentError(absl::StrCat("argument: rank ", options->rank,
                                                     " is outside [0, world_size ",
                                                     options->world_size, ")"));
    }
    config.rank = options->rank;
    config.world_size = options->world_size;
  } else if (options->world_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("argument: world_size ", options->world_size,
                                                   " is negative; pass 0 to take it from the "
                                                   "init method"));
  }

  for (const auto& [key, value] : file.options) {
    config.options.push_back({key, value, absl::StrCat("config file (", file.path, ")")});
  }
  if (has(offsetof(dist_init_options_t, num_options) + sizeof(size_t))) {
    for (size_t i = 0; i < options->num_options; ++i) {
      const dist_kv_t& kv = options->options[i];
      if (kv.key == nullptr || kv.value == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument: option ", i, " has a NULL key or value"));
      }
      config.options.push_back({kv.key, kv.value, "argument"});
    }
  }
  if (has(offsetof(dist_init_options_t, group_name) + sizeof(const char*)) &&
      options->group_name != nullptr && *options->group_name != '\0') {
    config.group_name = options->group_name;
  }
  DIST_RETURN_IF_ERROR(ResolveSurvivalOptions(file, config));
  DIST_RETURN_IF_ERROR(ResolveHierarchical(file, config));
  // A joining process gets its rank from the job it joins (dist_grow).
  if (HostStoreOf(options) != nullptr && options->world_size <= 0 && !config.join_enabled) {
    return absl::InvalidArgumentError(
        "argument: a store was given without rank and world_size; a host that brings its "
        "own store must say who this rank is (dist_init_options_t.rank and .world_size)");
  }
  return config;
}

std::vector<ConfigOption> ConfigRows(const ResolvedConfig& config) {
  std::vector<ConfigOption> rows = {
      {"backend", config.backend.value, config.backend.source},
      {"init_method", config.init_method.value, config.init_method.source},
      {"timeout_ms", config.timeout.value, config.timeout.source},
      {"log_level", config.log_level.value, config.log_level.source},
      {"config_file", config.config_file.value.empty() ? "(none)" : config.config_file.value,
       config.config_file.source},
      {"debug", config.debug.value, config.debug.source},
      {"trace_entries", config.trace_entries.value, config.trace_entries.source},
      {"trace_dir", config.trace_dir.value.empty() ? "(none)" : config.trace_dir.value,
       config.trace_dir.source},
      {"survival", config.survival.value, config.survival.source},
      {"failure_detect_ms", config.failure_detect_ms.value, config.failure_detect_ms.source},
      {"join", config.join.value, config.join.source},
      {"hierarchical", config.hierarchical.value, config.hierarchical.source},
  };
  for (const ConfigOption& option : config.options) {
    rows.push_back({absl::StrCat("option.", option.key), option.value, option.source});
  }
  return rows;
}

}  // namespace dist

// Process-wide logging to stderr. Every line looks the same whether the core
// or a plugin wrote it: "[dist r3 gloo] warn: message".
#ifndef DIST_CORE_LOGGING_H_
#define DIST_CORE_LOGGING_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dist/types.h"

namespace dist {

// Parses "error", "warn", "info", "debug", "trace" (case-insensitive).
absl::StatusOr<dist_log_level_t> ParseLogLevel(absl::string_view text);
const char* LogLevelName(dist_log_level_t level);

// The threshold; lines less severe than it are dropped. Starts from
// DIST_LOG_LEVEL (warn when unset or invalid; dist_init reports the invalid
// value as an error).
void SetLogLevel(dist_log_level_t level);
bool LogEnabled(dist_log_level_t level);

// The rank shown in every line; -1 shows no rank (before init).
void SetLogRank(int rank);

void LogLine(dist_log_level_t level, absl::string_view component, absl::string_view message);

}  // namespace dist

#endif  // DIST_CORE_LOGGING_H_

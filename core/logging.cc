#include "core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace dist {
namespace {

dist_log_level_t InitialLevel() {
  const char* text = std::getenv("DIST_LOG_LEVEL");
  if (text == nullptr || *text == '\0') return DIST_LOG_WARN;
  absl::StatusOr<dist_log_level_t> level = ParseLogLevel(text);
  return level.ok() ? *level : DIST_LOG_WARN;
}

std::atomic<int>& Level() {
  static std::atomic<int> level{InitialLevel()};
  return level;
}

std::atomic<int> g_rank{-1};

}  // namespace

absl::StatusOr<dist_log_level_t> ParseLogLevel(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "error") return DIST_LOG_ERROR;
  if (lower == "warn" || lower == "warning") return DIST_LOG_WARN;
  if (lower == "info") return DIST_LOG_INFO;
  if (lower == "debug") return DIST_LOG_DEBUG;
  if (lower == "trace") return DIST_LOG_TRACE;
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", text, "' is not one of error, warn, info, debug, trace"));
}

const char* LogLevelName(dist_log_level_t level) {
  switch (level) {
    case DIST_LOG_ERROR:
      return "error";
    case DIST_LOG_WARN:
      return "warn";
    case DIST_LOG_INFO:
      return "info";
    case DIST_LOG_DEBUG:
      return "debug";
    case DIST_LOG_TRACE:
      return "trace";
  }
  return "unknown";
}

void SetLogLevel(dist_log_level_t level) { Level().store(level); }

bool LogEnabled(dist_log_level_t level) { return static_cast<int>(level) <= Level().load(); }

void SetLogRank(int rank) { g_rank.store(rank); }

void LogLine(dist_log_level_t level, absl::string_view component, absl::string_view message) {
  if (!LogEnabled(level)) return;
  const int rank = g_rank.load();
  const std::string prefix = rank >= 0 ? absl::StrCat("[dist r", rank, " ", component, "] ")
                                       : absl::StrCat("[dist ", component, "] ");
  // One write per line so that lines of concurrent threads never interleave.
  const std::string line = absl::StrCat(prefix, LogLevelName(level), ": ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace dist

#include "support/slurm.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace dist::support {
namespace {

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace

std::optional<std::string> FirstSlurmHost(const std::string& nodelist) {
  // The first entry ends at the first comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string entry = nodelist.substr(0, end);
  const size_t open = entry.find('[');
  if (open == std::string::npos) {
    if (entry.empty()) return std::nullopt;
    return entry;
  }
  const size_t close = entry.find(']', open);
  if (close == std::string::npos || open == 0) return std::nullopt;
  // "01-04,7" -> "01": the first number keeps its zero padding.
  const std::string ranges = entry.substr(open + 1, close - open - 1);
  const std::string first = ranges.substr(0, ranges.find_first_of(",-"));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return entry.substr(0, open) + first + entry.substr(close + 1);
}

std::optional<std::vector<int>> ExpandSlurmTasksPerNode(const std::string& text) {
  std::vector<int> counts;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int count = 0;
    int repeat = 1;
    const size_t paren = part.find("(x");
    if (paren != absl::string_view::npos) {
      if (part.back() != ')' ||
          !absl::SimpleAtoi(part.substr(paren + 2, part.size() - paren - 3), &repeat)) {
        return std::nullopt;
      }
      part = part.substr(0, paren);
    }
    if (!absl::SimpleAtoi(part, &count) || count < 1 || repeat < 1 || repeat > 1000000) {
      return std::nullopt;
    }
    counts.insert(counts.end(), repeat, count);
  }
  return counts;
}

std::optional<std::string> SlurmMasterAddr() {
  std::optional<std::string> nodelist = Env("SLURM_JOB_NODELIST");
  if (!nodelist) nodelist = Env("SLURM_NODELIST");
  if (!nodelist) return std::nullopt;
  return FirstSlurmHost(*nodelist);
}

std::optional<int> SlurmMasterPort() {
  std::optional<std::string> job = Env("SLURM_JOB_ID");
  if (!job) job = Env("SLURM_JOBID");
  long long id = 0;
  if (!job || !absl::SimpleAtoi(*job, &id) || id < 0) return std::nullopt;
  return static_cast<int>(10000 + id % 20000);
}

std::optional<int> SlurmLocalWorldSize() {
  std::optional<std::string> per_node = Env("SLURM_STEP_TASKS_PER_NODE");
  if (!per_node) per_node = Env("SLURM_TASKS_PER_NODE");
  std::optional<std::string> node = Env("SLURM_NODEID");
  int index = 0;
  if (!per_node || !node || !absl::SimpleAtoi(*node, &index) || index < 0) return std::nullopt;
  std::optional<std::vector<int>> counts = ExpandSlurmTasksPerNode(*per_node);
  if (!counts || index >= static_cast<int>(counts->size())) return std::nullopt;
  return (*counts)[index];
}

}  // namespace dist::support

#include "process_identity.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dist_shm {
namespace {

// Reads /proc/<pid>/stat; returns false if the process is gone.
bool ReadStat(pid_t pid, char* state, uint64_t* start_time) {
  std::ifstream file(absl::StrCat("/proc/", pid, "/stat"));
  if (!file) return false;
  std::stringstream text;
  text << file.rdbuf();
  const std::string line = text.str();
  // The command name (field 2) may contain spaces and parentheses; the
  // fields after the last ')' are plain.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::vector<std::string> fields = absl::StrSplit(line.substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), fields[19] is field 22 (starttime).
  if (fields.size() < 20) return false;
  *state = fields[0].empty() ? '?' : fields[0][0];
  *start_time = std::strtoull(fields[19].c_str(), nullptr, 10);
  return true;
}

}  // namespace

ProcessIdentity SelfIdentity() {
  ProcessIdentity self;
  self.pid = getpid();
  char state = '?';
  ReadStat(self.pid, &state, &self.start_time);
  return self;
}

bool IsAlive(const ProcessIdentity& process) {
  if (process.pid <= 0) return false;
  if (kill(process.pid, 0) != 0 && errno == ESRCH) return false;
  char state = '?';
  uint64_t start_time = 0;
  if (!ReadStat(process.pid, &state, &start_time)) return false;
  if (state == 'Z' || state == 'X') return false;
  return start_time == process.start_time;
}

}  // namespace dist_shm

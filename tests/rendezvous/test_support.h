// Helpers for the rendezvous tests: loading plugin .so files from runfiles,
// a minimal host services table, free loopback ports and child processes
// with captured output and hard time limits.
#ifndef DIST_TESTS_RENDEZVOUS_TEST_SUPPORT_H_
#define DIST_TESTS_RENDEZVOUS_TEST_SUPPORT_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/rendezvous_plugin.h"

namespace dist::testing {

// Absolute path of a file in this workspace's runfiles.
std::string Runfile(const std::string& workspace_path);

// Path of libdist-rendezvous-<name>.so in runfiles.
std::string PluginPath(const std::string& name);

// dlopens the plugin, checks its table and runs initialize (once).
absl::StatusOr<const dist_rendezvous_plugin_t*> LoadPlugin(const std::string& name);

// A host table whose log writes to stderr.
const dist_host_api_t* TestHost();

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

// A fresh path under TEST_TMPDIR.
std::string TempPath(const std::string& name);

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved
  absl::Duration elapsed;
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

// A child process started with fork/exec. Its environment is the test's,
// minus every rank/launcher variable (RANK, MASTER_*, OMPI_*, SLURM_*, ...,
// DIST_STORE_TOKEN) so tests are hermetic, plus `env`.
class Process {
 public:
  static absl::StatusOr<std::unique_ptr<Process>> Start(const std::vector<std::string>& argv,
                                                        const EnvList& env = {});
  ~Process();  // kills and reaps a child still running

  // Reads output until `needle` appears (true) or the timeout passes.
  bool WaitForOutput(const std::string& needle, absl::Duration timeout);
  // Waits for exit, killing the child (SIGKILL) after `timeout`.
  ProcessResult Wait(absl::Duration timeout);
  void Kill(int signal_number);
  pid_t pid() const { return pid_; }

 private:
  Process(pid_t pid, int fd) : pid_(pid), fd_(fd), start_(absl::Now()) {}
  // Reads what is available within `timeout`; false at EOF.
  bool ReadSome(absl::Duration timeout);

  pid_t pid_;
  int fd_;
  absl::Time start_;
  std::string output_;
  bool eof_ = false;
  bool reaped_ = false;
};

// Strips every rank/launcher variable from this process's own environment
// (for in-process plugin tests).
void ClearLauncherEnv();

}  // namespace dist::testing

#endif  // DIST_TESTS_RENDEZVOUS_TEST_SUPPORT_H_

// Test helper: runs a real process with its stdout and stderr captured in
// files, bounded by a timeout, and can signal it while it runs.
#ifndef DIST_TESTS_TOOLS_SUBPROCESS_H_
#define DIST_TESTS_TOOLS_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace dist::testing {

struct ProcessResult {
  int exit_code = -1;   // valid when term_signal == 0
  int term_signal = 0;  // the signal that killed it, or 0
  bool timed_out = false;
  std::string out, err;
  absl::Duration elapsed;
};

// Path of a file in the test's runfiles, e.g. "tools/distrun/distrun".
std::string RunfilePath(const std::string& relative);

// A temporary directory of its own under TEST_TMPDIR.
std::string MakeTempDir(const std::string& name);

class Subprocess {
 public:
  // `env` entries ("KEY=VALUE", or "KEY=" with nothing after to drop KEY)
  // are applied over the test's environment.
  Subprocess(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Subprocess();  // kills the process if still running

  void Start();
  void Signal(int signal);
  // Waits until `text` appears in the captured stdout (true) or `timeout`
  // passes (false).
  bool WaitForOutput(const std::string& text, absl::Duration timeout);
  // Waits for the exit; on timeout kills it with SIGKILL and says so.
  ProcessResult Wait(absl::Duration timeout);

  // Start + Wait.
  static ProcessResult Run(std::vector<std::string> argv, std::vector<std::string> env = {},
                           absl::Duration timeout = absl::Seconds(60));

 private:
  std::vector<std::string> argv_, env_;
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  absl::Time start_;
};

}  // namespace dist::testing

#endif  // DIST_TESTS_TOOLS_SUBPROCESS_H_

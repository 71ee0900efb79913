#include "support/local_launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dist {
namespace {

volatile sig_atomic_t g_signal = 0;

void OnSignal(int signal) { g_signal = signal; }

// SIGINT/SIGTERM handlers for the launcher's lifetime, restored after.
class SignalCatcher {
 public:
  explicit SignalCatcher(bool active) : active_(active) {
    if (!active_) return;
    g_signal = 0;
    struct sigaction action {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalCatcher() {
    if (!active_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  int signal() const { return active_ ? g_signal : 0; }

 private:
  bool active_;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

// The process and what it started (its process group).
void Signal(pid_t pid, int signal) {
  if (kill(-pid, signal) != 0) kill(pid, signal);
}

[[noreturn]] void Exec(const LocalProcess& process, const std::string& tool, pid_t parent) {
  setpgid(0, 0);
  // Never outlive the launcher, even when it is killed.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  for (const auto& [key, value] : process.env) setenv(key.c_str(), value.c_str(), 1);
  std::vector<char*> argv;
  for (const std::string& arg : process.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(process.program.c_str(), argv.data());
  std::fprintf(stderr, "%s: cannot run %s for %s: %s\n", tool.c_str(), process.program.c_str(),
               process.name.c_str(), std::strerror(errno));
  _exit(127);
}

}  // namespace

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

absl::StatusOr<LocalLaunchResult> RunLocalProcesses(const std::vector<LocalProcess>& processes,
                                                    const LocalLaunchOptions& options) {
  SignalCatcher signals(options.forward_signals);
  LocalLaunchResult result;
  result.exits.resize(processes.size());
  std::vector<bool> running(processes.size(), false);
  const pid_t parent = getpid();
  for (size_t i = 0; i < processes.size(); ++i) {
    const pid_t pid = fork();
    if (pid == 0) Exec(processes[i], options.tool, parent);
    if (pid < 0) {
      const int error = errno;
      for (size_t j = 0; j < i; ++j) {
        Signal(result.exits[j].pid, SIGKILL);
        waitpid(result.exits[j].pid, nullptr, 0);
      }
      return absl::ResourceExhaustedError(
          absl::StrCat("fork failed for ", processes[i].name, ": ", std::strerror(error)));
    }
    setpgid(pid, pid);  // as the child does, whichever runs first
    result.exits[i].pid = pid;
    running[i] = true;
  }

  const absl::Time deadline = absl::Now() + options.timeout;
  absl::Time kill_at = absl::InfiniteFuture();
  bool stopping = false;  // the others were told to stop
  bool killed = false;    // and then killed after the grace period
  size_t left = processes.size();
  const auto stop = [&](int signal) {
    stopping = true;
    for (size_t i = 0; i < processes.size(); ++i) {
      if (running[i]) Signal(result.exits[i].pid, signal);
    }
    kill_at = absl::Now() + options.grace;
  };
  while (left > 0) {
    if (signals.signal() != 0 && !stopping) {
      result.signal = signals.signal();
      stop(result.signal);
    }
    if (!killed && absl::Now() > kill_at) {
      killed = true;
      for (size_t i = 0; i < processes.size(); ++i) {
        if (!running[i]) continue;
        std::fprintf(stderr, "%s: %s still running after the grace period; killing it\n",
                     options.tool.c_str(), processes[i].name.c_str());
        Signal(result.exits[i].pid, SIGKILL);
      }
    }
    if (absl::Now() > deadline) {
      for (size_t i = 0; i < processes.size(); ++i) {
        if (!running[i]) continue;
        Signal(result.exits[i].pid, SIGKILL);
        waitpid(result.exits[i].pid, &result.exits[i].status, 0);
        result.exits[i].timed_out = true;
        running[i] = false;
      }
      break;
    }
    bool reaped = false;
    for (size_t i = 0; i < processes.size(); ++i) {
      if (!running[i]) continue;
      LocalExit& exit = result.exits[i];
      if (waitpid(exit.pid, &exit.status, WNOHANG) != exit.pid) continue;
      reaped = true;
      running[i] = false;
      --left;
      if (ExitCodeOf(exit.status) == 0 || stopping) continue;
      if (result.first_failure < 0) result.first_failure = static_cast<int>(i);
      // The others would wait for this one until their own timeout.
      if (options.stop_on_failure) stop(SIGTERM);
    }
    if (!reaped) absl::SleepFor(absl::Milliseconds(20));
  }
  return result;
}

}  // namespace dist

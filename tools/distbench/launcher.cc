#include "tools/distbench/launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/common/free_port.h"

namespace distbench {
namespace {

volatile sig_atomic_t g_signal = 0;

void OnSignal(int signal) { g_signal = signal; }

struct Child {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("exited with code ", WEXITSTATUS(status));
}

}  // namespace

int LaunchLocalRanks(const LaunchOptions& options) {
  const absl::StatusOr<int> free_port = dist::PickFreePort();
  if (!free_port.ok()) {
    std::fprintf(stderr, "distbench: no free loopback port for MASTER_PORT: %s\n",
                 std::string(free_port.status().message()).c_str());
    return 1;
  }
  const int port = *free_port;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  const pid_t parent = getpid();
  std::vector<Child> children(options.ranks);
  for (int rank = 0; rank < options.ranks; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::fprintf(stderr, "distbench: fork failed for rank %d: %s\n", rank, std::strerror(errno));
      for (Child& child : children) {
        if (child.running) kill(child.pid, SIGKILL);
      }
      return 1;
    }
    if (pid == 0) {
      // A rank never outlives the launcher, even if the launcher is killed.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      setenv("RANK", absl::StrCat(rank).c_str(), 1);
      setenv("WORLD_SIZE", absl::StrCat(options.ranks).c_str(), 1);
      setenv("LOCAL_RANK", absl::StrCat(rank).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", absl::StrCat(options.ranks).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", absl::StrCat(port).c_str(), 1);
      std::vector<char*> argv;
      std::string self = "distbench";
      argv.push_back(self.data());
      std::vector<std::string> args = options.args;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "distbench: cannot re-execute itself for rank %d: %s\n", rank,
                   std::strerror(errno));
      _exit(127);
    }
    children[rank].pid = pid;
    children[rank].running = true;
  }

  int first_failure = 0;
  int failed_rank = -1;
  absl::Time kill_at = absl::InfiniteFuture();
  bool stopping = false;  // the others were told to stop
  bool killed = false;    // and then killed after the grace period
  int running = options.ranks;
  while (running > 0) {
    if (g_signal != 0 && !stopping) {
      stopping = true;
      for (Child& child : children) {
        if (child.running) kill(child.pid, g_signal);
      }
      kill_at = absl::Now() + options.grace;
      if (first_failure == 0) first_failure = 128 + g_signal;
    }
    if (!killed && absl::Now() > kill_at) {
      killed = true;
      for (int rank = 0; rank < options.ranks; ++rank) {
        if (children[rank].running) {
          std::fprintf(stderr,
                       "distbench: rank %d still running after the grace period; killing it\n",
                       rank);
          kill(children[rank].pid, SIGKILL);
        }
      }
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    for (int rank = 0; rank < options.ranks; ++rank) {
      Child& child = children[rank];
      if (child.pid != pid) continue;
      child.running = false;
      child.status = status;
      --running;
      if (ExitCodeOf(status) != 0) {
        if (first_failure == 0) {
          first_failure = ExitCodeOf(status);
          failed_rank = rank;
        }
        // One rank failed: the others would wait for it until their timeout.
        if (!stopping) {
          stopping = true;
          for (Child& other : children) {
            if (other.running) kill(other.pid, SIGTERM);
          }
          kill_at = absl::Now() + options.grace;
        }
      }
    }
  }
  if (first_failure != 0) {
    for (int rank = 0; rank < options.ranks; ++rank) {
      if (ExitCodeOf(children[rank].status) != 0) {
        std::fprintf(stderr, "distbench: rank %d %s%s\n", rank,
                     Describe(children[rank].status).c_str(),
                     rank == failed_rank ? " (first failure)" : "");
      }
    }
  }
  return first_failure;
}

}  // namespace distbench

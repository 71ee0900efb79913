#include "tests/rendezvous/test_support.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "support/free_port.h"

extern char** environ;

namespace dist::testing {
namespace {

bool IsLauncherVariable(const std::string& name) {
  static const char* const kExact[] = {
      "RANK",        "WORLD_SIZE",      "LOCAL_RANK",       "LOCAL_WORLD_SIZE",
      "MASTER_ADDR", "MASTER_PORT",     "DIST_STORE_TOKEN", "PMI_RANK",
      "PMI_SIZE",    "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};
  for (const char* exact : kExact) {
    if (name == exact) return true;
  }
  return absl::StartsWith(name, "OMPI_COMM_WORLD_") || absl::StartsWith(name, "SLURM_");
}

void Log(dist_log_level_t level, const char* component, const char* message) {
  fprintf(stderr, "[test-host %s] %d: %s\n", component, static_cast<int>(level), message);
}
int LogEnabled(dist_log_level_t level) { return level <= DIST_LOG_INFO; }
dist_error_t* NoPrefix(const dist_store_t*, const char*, dist_store_t**) {
  return dist_error_new(DIST_UNIMPLEMENTED, "the test host has no store_with_prefix");
}

}  // namespace

std::string Runfile(const std::string& workspace_path) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "dist", "/",
                      workspace_path);
}

std::string PluginPath(const std::string& name) {
  return Runfile(absl::StrCat("plugins/rendezvous/", name, "/libdist-rendezvous-", name, ".so"));
}

const dist_host_api_t* TestHost() {
  static const dist_host_api_t host = {
      sizeof(dist_host_api_t), 1, 0, "test", &Log, &LogEnabled, &NoPrefix};
  return &host;
}

absl::StatusOr<const dist_rendezvous_plugin_t*> LoadPlugin(const std::string& name) {
  static absl::Mutex mu;
  static auto* loaded = new std::map<std::string, const dist_rendezvous_plugin_t*>();
  absl::MutexLock lock(&mu);
  if (auto it = loaded->find(name); it != loaded->end()) return it->second;
  const std::string path = PluginPath(name);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return absl::NotFoundError(absl::StrCat("dlopen: ", dlerror()));
  auto entry = reinterpret_cast<dist_rendezvous_plugin_entry_fn>(
      dlsym(handle, DIST_RENDEZVOUS_ENTRY_SYMBOL));
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat(path, " has no entry symbol"));
  const dist_rendezvous_plugin_t* plugin = entry();
  if (plugin == nullptr || plugin->abi_major != DIST_RENDEZVOUS_ABI_MAJOR) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": bad plugin table"));
  }
  if (dist_error_t* error = plugin->initialize(TestHost())) {
    absl::Status status = absl::InternalError(dist_error_message(error));
    dist_error_destroy(error);
    return status;
  }
  (*loaded)[name] = plugin;
  return plugin;
}

int FreePort() {
  absl::StatusOr<int> port = PickFreePort();
  return port.ok() ? *port : 0;
}

std::string TempPath(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* dir = getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/", name, ".", getpid(), ".", counter++);
}

void ClearLauncherEnv() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (IsLauncherVariable(name)) names.push_back(name);
  }
  for (const std::string& name : names) unsetenv(name.c_str());
}

absl::StatusOr<std::unique_ptr<Process>> Process::Start(const std::vector<std::string>& argv,
                                                        const EnvList& env) {
  // Everything the child needs is built before fork: after fork in a
  // threaded parent only async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = IsLauncherVariable(name);
    for (const auto& [key, value] : env) overridden = overridden || key == name;
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp, args;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  return std::unique_ptr<Process>(new Process(pid, fds[0]));
}

Process::~Process() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(fd_);
}

void Process::Kill(int signal_number) {
  if (!reaped_) kill(pid_, signal_number);
}

bool Process::ReadSome(absl::Duration timeout) {
  if (eof_) return false;
  pollfd entry = {fd_, POLLIN, 0};
  const int ms = static_cast<int>(std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout)));
  if (poll(&entry, 1, ms) <= 0) return true;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd_, buffer, sizeof(buffer));
    if (n > 0) {
      output_.append(buffer, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) eof_ = true;
    break;
  }
  return !eof_;
}

bool Process::WaitForOutput(const std::string& needle, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!absl::StrContains(output_, needle)) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration() || eof_) return absl::StrContains(output_, needle);
    ReadSome(std::min(left, absl::Milliseconds(50)));
  }
  return true;
}

ProcessResult Process::Wait(absl::Duration timeout) {
  ProcessResult result;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (absl::Now() >= deadline) {
      result.timed_out = true;
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    ReadSome(absl::Milliseconds(20));
  }
  reaped_ = true;
  const absl::Time drain_until = absl::Now() + absl::Seconds(2);
  while (ReadSome(absl::Milliseconds(100)) && absl::Now() < drain_until) {
  }
  result.elapsed = absl::Now() - start_;
  result.output = output_;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace dist::testing

#include "tests/tools/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

extern char** environ;

namespace dist::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string TmpRoot() {
  const char* dir = getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

}  // namespace

std::string RunfilePath(const std::string& relative) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  if (srcdir == nullptr) return relative;
  return absl::StrCat(srcdir, "/", workspace ? workspace : "dist", "/", relative);
}

std::string MakeTempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  std::string dir = absl::StrCat(TmpRoot(), "/", name, ".", getpid(), ".", counter++);
  mkdir(dir.c_str(), 0700);
  return dir;
}

Subprocess::Subprocess(std::vector<std::string> argv, std::vector<std::string> env)
    : argv_(std::move(argv)), env_(std::move(env)) {
  std::string dir = MakeTempDir("subprocess");
  out_path_ = dir + "/stdout";
  err_path_ = dir + "/stderr";
}

Subprocess::~Subprocess() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void Subprocess::Start() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& extra : env_) {
    absl::string_view key(extra);
    key = key.substr(0, key.find('=') + 1);
    for (auto it = env.begin(); it != env.end();) {
      it = absl::string_view(*it).substr(0, key.size()) == key ? env.erase(it) : it + 1;
    }
    if (extra.size() > key.size()) env.push_back(extra);
  }
  std::vector<char*> argv, envp;
  for (std::string& a : argv_) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  start_ = absl::Now();
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);  // so that a stuck test can kill everything it started
    int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execve(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "cannot exec %s\n", argv[0]);
    _exit(127);
  }
}

void Subprocess::Signal(int signal) { kill(pid_, signal); }

bool Subprocess::WaitForOutput(const std::string& text, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ReadFile(out_path_).find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

ProcessResult Subprocess::Wait(absl::Duration timeout) {
  ProcessResult result;
  absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    if (absl::Now() > deadline) {
      result.timed_out = true;
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  pid_ = -1;
  result.elapsed = absl::Now() - start_;
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = ReadFile(out_path_);
  result.err = ReadFile(err_path_);
  return result;
}

ProcessResult Subprocess::Run(std::vector<std::string> argv, std::vector<std::string> env,
                              absl::Duration timeout) {
  Subprocess process(std::move(argv), std::move(env));
  process.Start();
  return process.Wait(timeout);
}

}  // namespace dist::testing

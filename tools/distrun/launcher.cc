#include "tools/distrun/launcher.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tools/distrun/exit_description.h"
#include "tools/distrun/line_prefixer.h"

namespace dist::distrun {
namespace {

// After every rank has exited, how long output that a rank's own children
// still write (they hold the pipe open) is waited for.
constexpr int64_t kDrainMs = 2000;

// Sets the soft open-files limit to `soft` (0: leaves it) for the ranks
// started in its scope, which inherit it, and restores distrun's own after.
class RankOpenFilesLimit {
 public:
  explicit RankOpenFilesLimit(uint64_t soft) {
    if (soft == 0 || getrlimit(RLIMIT_NOFILE, &own_) != 0 || own_.rlim_cur == soft) return;
    rlimit ranks = own_;
    ranks.rlim_cur = static_cast<rlim_t>(soft);
    set_ = setrlimit(RLIMIT_NOFILE, &ranks) == 0;
  }
  ~RankOpenFilesLimit() {
    if (set_) setrlimit(RLIMIT_NOFILE, &own_);
  }

 private:
  rlimit own_{};
  bool set_ = false;
};

}  // namespace

struct Launcher::Stream {
  Launcher* launcher = nullptr;
  uv_pipe_t pipe;
  std::unique_ptr<LinePrefixer> lines;
  bool open = false;
};

struct Launcher::Rank {
  Launcher* launcher = nullptr;
  int local_rank = 0;
  int rank = 0;  // global
  uv_process_t process;
  Stream out, err;
  int pid = 0;
  bool started = false;
  bool exited = false;
  int64_t exit_code = 0;
  int term_signal = 0;
  int signal_sent = 0;  // the last signal distrun sent it
  int restart = 0;      // > 0: a restarted rank (--max_restarts), which joins the job
  absl::Duration elapsed;

  bool failed() const { return exit_code != 0 || term_signal != 0; }
  bool live() const { return started && (!exited || out.open || err.open); }
};

Launcher::Launcher(Job job) : job_(std::move(job)) { uv_loop_init(&loop_); }

Launcher::~Launcher() { uv_loop_close(&loop_); }

void Launcher::Log(const std::string& message) {
  WriteAll(STDERR_FILENO, absl::StrCat("distrun: ", message, "\n"));
}

int Launcher::Run() {
  start_time_ = absl::Now();
  uv_timer_init(&loop_, &stop_timer_);
  uv_timer_init(&loop_, &timeout_timer_);
  uv_timer_init(&loop_, &drain_timer_);
  stop_timer_.data = timeout_timer_.data = drain_timer_.data = this;
  uv_signal_t* signals[] = {&sigint_, &sigterm_, &sighup_};
  const int numbers[] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; ++i) {
    uv_signal_init(&loop_, signals[i]);
    signals[i]->data = this;
    uv_signal_start(
        signals[i],
        [](uv_signal_t* handle, int signal) {
          static_cast<Launcher*>(handle->data)->OnSignal(signal);
        },
        numbers[i]);
  }

  for (int i = 0; i < job_.nproc_per_node; ++i) {
    auto rank = std::make_unique<Rank>();
    rank->launcher = this;
    rank->local_rank = i;
    rank->rank = job_.global_rank(i);
    ranks_.push_back(std::move(rank));
  }
  {
    // The store distrun may host raised distrun's limit for its clients;
    // the ranks get the one distrun was given.
    RankOpenFilesLimit limit(job_.rank_open_files);
    for (int i = 0; i < job_.nproc_per_node; ++i) {
      if (!StartRank(*ranks_[i])) {
        if (i > 0) {
          BeginStop(absl::ZeroDuration(), "stopping the ranks already started");
        }
        break;
      }
    }
  }
  if (job_.timeout > absl::ZeroDuration() && start_error_code_ == 0) {
    uv_timer_start(
        &timeout_timer_, [](uv_timer_t* t) { static_cast<Launcher*>(t->data)->OnTimeout(); },
        absl::ToInt64Milliseconds(job_.timeout), 0);
  }
  MaybeFinish();
  uv_run(&loop_, UV_RUN_DEFAULT);

  int code = 0;
  if (start_error_code_ != 0) {
    code = start_error_code_;
  } else if (timed_out_) {
    code = 124;
  } else if (first_failure_ != nullptr) {
    code = ShellExitCode(first_failure_->exit_code, first_failure_->term_signal);
  } else if (forwarded_signal_ != 0) {
    code = 128 + forwarded_signal_;
  } else if (!lost_.empty() && lost_.size() == ranks_.size()) {
    code = ShellExitCode(lost_.front()->exit_code, lost_.front()->term_signal);  // none survived
  }
  if (code == 0 && !lost_.empty()) {
    std::vector<int> lost;
    for (const Rank* rank : lost_) lost.push_back(rank->rank);
    Log(absl::StrCat(
        "the job survived the loss of rank", lost.size() == 1 ? " " : "s ",
        absl::StrJoin(lost, ", "), " (--survive)",
        restarts_ > 0 ? absl::StrCat("; ", restarts_, " restarted (--max_restarts)") : ""));
  }
  if (code != 0) PrintSummary();
  return code;
}

bool Launcher::StartRank(Rank& rank) {
  std::vector<std::string> env =
      RankEnvironment(job_, rank.local_rank, CurrentEnvironment(), rank.restart);
  std::vector<char*> env_ptrs, arg_ptrs;
  for (std::string& e : env) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);
  std::vector<std::string> argv = job_.argv;
  for (std::string& a : argv) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);

  std::string prefix = job_.prefix ? absl::StrCat("[", rank.rank, "] ") : "";
  Stream* streams[] = {&rank.out, &rank.err};
  const int fds[] = {STDOUT_FILENO, STDERR_FILENO};
  uv_stdio_container_t stdio[3];
  // Several ranks cannot share a terminal's input sensibly: they read
  // /dev/null, as under torchrun.
  stdio[0].flags = UV_IGNORE;
  for (int i = 0; i < 2; ++i) {
    Stream& s = *streams[i];
    s.launcher = this;
    s.lines = std::make_unique<LinePrefixer>(prefix, fds[i]);
    uv_pipe_init(&loop_, &s.pipe, 0);
    s.pipe.data = &s;
    stdio[i + 1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[i + 1].data.stream = reinterpret_cast<uv_stream_t*>(&s.pipe);
  }

  uv_process_options_t options{};
  options.file = arg_ptrs[0];
  options.args = arg_ptrs.data();
  options.env = env_ptrs.data();
  options.flags = UV_PROCESS_DETACHED;  // own session and process group
  options.stdio_count = 3;
  options.stdio = stdio;
  options.exit_cb = [](uv_process_t* process, int64_t exit_code, int term_signal) {
    Rank& r = *static_cast<Rank*>(process->data);
    r.launcher->OnRankExit(r, exit_code, term_signal);
  };
  rank.process.data = &rank;
  int rc = uv_spawn(&loop_, &rank.process, &options);
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&rank.process), nullptr);
    for (Stream* s : streams) {
      uv_close(reinterpret_cast<uv_handle_t*>(&s->pipe), nullptr);
    }
    start_error_code_ = (rc == UV_ENOENT) ? 127 : 126;
    // Out of descriptors or processes is this launcher's (or the host's)
    // limit, not the program's fault: say which limit.
    const char* fix = rc == UV_EMFILE   ? "raise the open-files limit (ulimit -n): distrun keeps 3 "
                                          "pipes per rank"
                      : rc == UV_ENFILE ? "the host is out of file descriptors (fs.file-max)"
                      : rc == UV_EAGAIN ? "the user's process limit is reached (ulimit -u)"
                      : rc == UV_ENOMEM ? "the host is out of memory"
                                        : "check the program name, PATH and permissions";
    Log(absl::StrCat("cannot start rank ", rank.rank, " ('", job_.argv[0], "'): ", uv_strerror(rc),
                     " (", uv_err_name(rc), "); ", fix));
    return false;
  }
  rank.started = true;
  rank.pid = rank.process.pid;
  ++running_;
  for (Stream* s : streams) {
    s->open = true;
    ++open_streams_;
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&s->pipe),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
          // One loop thread: a single buffer serves every read.
          static char buffer[64 * 1024];
          *buf = uv_buf_init(buffer, sizeof(buffer));
        },
        [](uv_stream_t* pipe, ssize_t nread, const uv_buf_t* buf) {
          Stream& s = *static_cast<Stream*>(pipe->data);
          if (nread > 0) {
            s.lines->Append(absl::string_view(buf->base, nread));
            return;
          }
          if (nread == 0) return;  // EAGAIN
          s.lines->Flush();        // EOF or a read error: the stream is done
          if (!s.open) return;
          s.open = false;
          uv_close(reinterpret_cast<uv_handle_t*>(pipe), [](uv_handle_t* h) {
            static_cast<Stream*>(h->data)->launcher->OnStreamClosed();
          });
        });
  }
  return true;
}

void Launcher::OnRankExit(Rank& rank, int64_t exit_code, int term_signal) {
  rank.exited = true;
  rank.exit_code = exit_code;
  rank.term_signal = term_signal;
  rank.elapsed = absl::Now() - start_time_;
  --running_;
  uv_close(reinterpret_cast<uv_handle_t*>(&rank.process), nullptr);
  if (rank.failed() && job_.survive && term_signal != 0 && !stopping_ && !timed_out_) {
    lost_.push_back(&rank);
    if (restarts_ < job_.max_restarts) {
      Log(absl::StrCat("rank ", rank.rank, " ", DescribeExit(exit_code, term_signal),
                       "; restarting it as a process that joins the running job (restart ",
                       restarts_ + 1, " of ", job_.max_restarts, ", --max_restarts)"));
      if (Restart(rank)) return;
    } else {
      Log(absl::StrCat("rank ", rank.rank, " ", DescribeExit(exit_code, term_signal),
                       "; the others go on without it (--survive",
                       job_.max_restarts > 0 ? ", no restart left" : "", ")"));
    }
    MaybeFinish();
    return;
  }
  if (rank.failed() && first_failure_ == nullptr && !timed_out_) {
    first_failure_ = &rank;
    if (!stopping_ && running_ > 0) {
      BeginStop(job_.grace,
                absl::StrCat("rank ", rank.rank, " ", DescribeExit(exit_code, term_signal),
                             "; stopping the other ranks (SIGTERM in ",
                             absl::FormatDuration(job_.grace), ", then SIGKILL; see --grace)"));
    }
  }
  MaybeFinish();
}

bool Launcher::Restart(const Rank& lost) {
  auto rank = std::make_unique<Rank>();
  rank->launcher = this;
  rank->local_rank = lost.local_rank;
  rank->rank = lost.rank;
  rank->restart = ++restarts_;
  ranks_.push_back(std::move(rank));
  RankOpenFilesLimit limit(job_.rank_open_files);
  // A restart that cannot start is the launcher's failure, as at start-up.
  return StartRank(*ranks_.back());
}

void Launcher::OnStreamClosed() {
  --open_streams_;
  MaybeFinish();
}

void Launcher::BeginStop(absl::Duration before_terminate, const std::string& why) {
  if (stopping_) return;
  stopping_ = true;
  Log(why);
  next_step_ = NextStep::kTerminate;
  uv_timer_start(
      &stop_timer_, [](uv_timer_t* t) { static_cast<Launcher*>(t->data)->OnStopTimer(); },
      absl::ToInt64Milliseconds(before_terminate), 0);
}

void Launcher::SendToLiveRanks(int signal) {
  std::vector<int> sent;
  for (auto& rank : ranks_) {
    if (!rank->live()) continue;
    // The whole process group: the rank and whatever it started.
    if (kill(-rank->pid, signal) != 0 && !rank->exited) kill(rank->pid, signal);
    if (!rank->exited) {
      rank->signal_sent = signal;
      sent.push_back(rank->rank);
    }
  }
  if (!sent.empty()) {
    Log(absl::StrCat("sent ", SignalName(signal), " to rank", sent.size() > 1 ? "s " : " ",
                     absl::StrJoin(sent, ", ")));
  }
}

void Launcher::OnStopTimer() {
  NextStep step = next_step_;
  next_step_ = NextStep::kNone;
  if (step == NextStep::kTerminate) {
    SendToLiveRanks(SIGTERM);
    next_step_ = NextStep::kKill;
    uv_timer_start(
        &stop_timer_, [](uv_timer_t* t) { static_cast<Launcher*>(t->data)->OnStopTimer(); },
        absl::ToInt64Milliseconds(job_.grace), 0);
  } else if (step == NextStep::kKill) {
    SendToLiveRanks(SIGKILL);
  }
}

void Launcher::OnSignal(int signal) {
  if (forwarded_signal_ != 0) {
    Log(absl::StrCat("received ", SignalName(signal), " again; killing every rank"));
    uv_timer_stop(&stop_timer_);
    next_step_ = NextStep::kNone;
    SendToLiveRanks(SIGKILL);
    return;
  }
  forwarded_signal_ = signal;
  stopping_ = true;
  Log(absl::StrCat("received ", SignalName(signal), "; forwarding it to the ranks (SIGKILL in ",
                   absl::FormatDuration(job_.grace), ")"));
  SendToLiveRanks(signal);
  next_step_ = NextStep::kKill;
  uv_timer_start(
      &stop_timer_, [](uv_timer_t* t) { static_cast<Launcher*>(t->data)->OnStopTimer(); },
      absl::ToInt64Milliseconds(job_.grace), 0);
}

void Launcher::OnTimeout() {
  timed_out_ = true;
  stopping_ = true;
  Log(absl::StrCat("the job ran past --timeout=", absl::FormatDuration(job_.timeout),
                   "; stopping every rank"));
  next_step_ = NextStep::kTerminate;
  OnStopTimer();
}

void Launcher::CloseStreams() {
  for (auto& rank : ranks_) {
    for (Stream* s : {&rank->out, &rank->err}) {
      if (!s->open) continue;
      s->open = false;
      uv_read_stop(reinterpret_cast<uv_stream_t*>(&s->pipe));
      s->lines->Flush();
      uv_close(reinterpret_cast<uv_handle_t*>(&s->pipe),
               [](uv_handle_t* h) { static_cast<Stream*>(h->data)->launcher->OnStreamClosed(); });
    }
  }
}

void Launcher::MaybeFinish() {
  if (finished_ || running_ > 0) return;
  if (open_streams_ > 0) {
    // Every rank is gone, but something they started still holds a pipe.
    if (!uv_is_active(reinterpret_cast<uv_handle_t*>(&drain_timer_))) {
      uv_timer_start(
          &drain_timer_, [](uv_timer_t* t) { static_cast<Launcher*>(t->data)->CloseStreams(); },
          kDrainMs, 0);
    }
    return;
  }
  finished_ = true;
  for (uv_timer_t* t : {&stop_timer_, &timeout_timer_, &drain_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(t), nullptr);
  }
  for (uv_signal_t* s : {&sigint_, &sigterm_, &sighup_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(s), nullptr);
  }
}

void Launcher::PrintSummary() {
  if (timed_out_) {
    Log(absl::StrCat("the job timed out after ", absl::FormatDuration(job_.timeout),
                     " (--timeout)"));
  } else if (first_failure_ != nullptr) {
    Log(absl::StrCat("rank ", first_failure_->rank, " failed first: ",
                     DescribeExit(first_failure_->exit_code, first_failure_->term_signal)));
  }
  Log(absl::StrCat("summary of ", ranks_.size(), ranks_.size() == 1 ? " rank" : " ranks",
                   " on node ", job_.node_rank, ":"));
  for (const auto& rank : ranks_) {
    std::string line =
        absl::StrCat("  rank ", rank->rank,
                     rank->restart > 0 ? absl::StrCat(" (restart ", rank->restart, ")") : "", ": ");
    if (!rank->started) {
      absl::StrAppend(&line, "not started");
    } else {
      absl::StrAppend(&line, DescribeExit(rank->exit_code, rank->term_signal),
                      absl::StrFormat(" after %.2fs", absl::ToDoubleSeconds(rank->elapsed)));
      if (rank.get() == first_failure_) absl::StrAppend(&line, " (first failure)");
      if (rank->signal_sent != 0 && rank->term_signal == rank->signal_sent &&
          rank.get() != first_failure_) {
        absl::StrAppend(&line, " (stopped by distrun)");
      }
    }
    Log(line);
  }
}

}  // namespace dist::distrun

#include "tools/distinfo/process_group.h"

#include <signal.h>
#include <string.h>
#include <uv.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "tools/common/signal_name.h"

namespace dist::distinfo {
namespace {

struct Child;

struct Pipe {
  uv_pipe_t handle;
  std::string* sink = nullptr;
  Child* owner = nullptr;
};

struct Child {
  uv_process_t process;
  Pipe out, err;
  ProcessOutcome* outcome = nullptr;
  struct Group* group = nullptr;
  bool running = false;
  int open_pipes = 0;
};

struct Group {
  uv_loop_t loop;
  uv_timer_t deadline, failure_timer;
  std::vector<std::unique_ptr<Child>> children;
  int running = 0;
  int open_pipes = 0;
  absl::Duration after_failure;
  bool failure_seen = false;

  void KillAll(bool at_deadline) {
    for (auto& child : children) {
      if (!child->running && child->open_pipes == 0) continue;
      if (child->running) {
        if (at_deadline) {
          child->outcome->killed_at_deadline = true;
        } else {
          child->outcome->killed_after_failure = true;
        }
      }
      // The whole group: mpirun's ranks, or whatever still holds a pipe.
      kill(-child->process.pid, SIGKILL);
    }
  }

  void MaybeStopTimers() {
    if (running > 0 || open_pipes > 0) return;
    uv_timer_stop(&deadline);
    uv_timer_stop(&failure_timer);
  }
};

void CloseHandle(uv_handle_t* handle) {
  if (!uv_is_closing(handle)) uv_close(handle, nullptr);
}

}  // namespace

std::string ProcessOutcome::Describe() const {
  if (!started) return absl::StrCat("did not start: ", start_error);
  if (killed_at_deadline) return "killed at the self-test timeout";
  if (killed_after_failure) return "killed after another process failed";
  if (term_signal != 0) {
    return absl::StrCat("killed by ", tools::SignalName(term_signal));
  }
  return absl::StrCat("exited with code ", exit_code);
}

std::vector<ProcessOutcome> RunProcessGroup(const std::vector<ProcessSpec>& specs,
                                            absl::Duration timeout, absl::Duration after_failure) {
  std::vector<ProcessOutcome> outcomes(specs.size());
  Group group;
  group.after_failure = after_failure;
  uv_loop_init(&group.loop);
  uv_timer_init(&group.loop, &group.deadline);
  uv_timer_init(&group.loop, &group.failure_timer);
  group.deadline.data = group.failure_timer.data = &group;

  for (size_t i = 0; i < specs.size(); ++i) {
    auto child = std::make_unique<Child>();
    Child& c = *child;
    group.children.push_back(std::move(child));
    c.outcome = &outcomes[i];
    c.group = &group;
    std::vector<std::string> argv = specs[i].argv, env = specs[i].env;
    std::vector<char*> arg_ptrs, env_ptrs;
    for (std::string& a : argv) arg_ptrs.push_back(a.data());
    arg_ptrs.push_back(nullptr);
    for (std::string& e : env) env_ptrs.push_back(e.data());
    env_ptrs.push_back(nullptr);

    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    Pipe* pipes[] = {&c.out, &c.err};
    std::string* sinks[] = {&c.outcome->out, &c.outcome->err};
    for (int p = 0; p < 2; ++p) {
      uv_pipe_init(&group.loop, &pipes[p]->handle, 0);
      pipes[p]->handle.data = pipes[p];
      pipes[p]->sink = sinks[p];
      pipes[p]->owner = &c;
      stdio[p + 1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
      stdio[p + 1].data.stream = reinterpret_cast<uv_stream_t*>(&pipes[p]->handle);
    }
    uv_process_options_t options{};
    options.file = arg_ptrs[0];
    options.args = arg_ptrs.data();
    options.env = env_ptrs.data();
    options.flags = UV_PROCESS_DETACHED;
    options.stdio_count = 3;
    options.stdio = stdio;
    options.exit_cb = [](uv_process_t* process, int64_t code, int signal) {
      Child& c = *static_cast<Child*>(process->data);
      Group& g = *c.group;
      c.running = false;
      --g.running;
      c.outcome->exit_code = code;
      c.outcome->term_signal = signal;
      uv_close(reinterpret_cast<uv_handle_t*>(process), nullptr);
      if ((code != 0 || signal != 0) && !g.failure_seen && g.running > 0) {
        g.failure_seen = true;
        uv_timer_start(
            &g.failure_timer, [](uv_timer_t* t) { static_cast<Group*>(t->data)->KillAll(false); },
            absl::ToInt64Milliseconds(g.after_failure), 0);
      }
      g.MaybeStopTimers();
    };
    c.process.data = &c;
    int rc = uv_spawn(&group.loop, &c.process, &options);
    if (rc != 0) {
      c.outcome->start_error =
          absl::StrCat(argv[0], ": ", uv_strerror(rc), " (", uv_err_name(rc), ")");
      CloseHandle(reinterpret_cast<uv_handle_t*>(&c.process));
      for (Pipe* p : pipes) CloseHandle(reinterpret_cast<uv_handle_t*>(&p->handle));
      continue;
    }
    c.outcome->started = true;
    c.running = true;
    ++group.running;
    for (Pipe* p : pipes) {
      ++group.open_pipes;
      ++c.open_pipes;
      uv_read_start(
          reinterpret_cast<uv_stream_t*>(&p->handle),
          [](uv_handle_t*, size_t, uv_buf_t* buf) {
            static char buffer[64 * 1024];
            *buf = uv_buf_init(buffer, sizeof(buffer));
          },
          [](uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
            Pipe& p = *static_cast<Pipe*>(stream->data);
            if (nread > 0) {
              p.sink->append(buf->base, nread);
            } else if (nread < 0) {  // EOF or error: done with this pipe
              --p.owner->open_pipes;
              --p.owner->group->open_pipes;
              uv_close(reinterpret_cast<uv_handle_t*>(stream), nullptr);
              p.owner->group->MaybeStopTimers();
            }
          });
    }
  }
  if (group.running > 0) {
    uv_timer_start(
        &group.deadline, [](uv_timer_t* t) { static_cast<Group*>(t->data)->KillAll(true); },
        absl::ToInt64Milliseconds(timeout), 0);
  }
  // Timers keep the loop alive only while something is left to wait for:
  // they are stopped as soon as every process and pipe is done.
  uv_unref(reinterpret_cast<uv_handle_t*>(&group.deadline));
  uv_unref(reinterpret_cast<uv_handle_t*>(&group.failure_timer));
  uv_run(&group.loop, UV_RUN_DEFAULT);
  CloseHandle(reinterpret_cast<uv_handle_t*>(&group.deadline));
  CloseHandle(reinterpret_cast<uv_handle_t*>(&group.failure_timer));
  uv_run(&group.loop, UV_RUN_DEFAULT);
  uv_loop_close(&group.loop);
  return outcomes;
}

}  // namespace dist::distinfo

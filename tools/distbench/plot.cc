#include "tools/distbench/plot.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"

namespace distbench {
namespace {

constexpr absl::Duration kGnuplotTimeout = absl::Seconds(60);

struct Series {
  std::string title;
  std::string data_file;
  bool raw = false;
  int color = 0;  // a plugin line and its raw baseline share a color
};

std::string Quote(const std::string& text) {
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

// Runs `gnuplot script`, output to `log`; kills it after the timeout.
absl::Status RunGnuplot(const std::string& script, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError("fork failed while starting gnuplot");
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + kGnuplotTimeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return absl::InternalError("waitpid failed on gnuplot");
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return absl::DeadlineExceededError("gnuplot did not finish within 60 s");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::NotFoundError(
        "gnuplot is not in PATH; install it (apt-get install gnuplot-nox) to use --plot");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::string first;
    std::getline(in, first);
    while (first.empty() && std::getline(in, first)) {
    }
    return absl::InternalError(absl::StrCat("gnuplot failed: ", first));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PlotBusBandwidth(const std::string& png_path,
                              const std::vector<nlohmann::json>& runs) {
  std::string dir_template = absl::StrCat(
      std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp", "/distbench-plot-XXXXXX");
  if (mkdtemp(dir_template.data()) == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create a temporary directory: ", std::strerror(errno)));
  }
  const std::string dir = dir_template;

  std::vector<Series> series;
  int color = 0;
  for (size_t run_index = 0; run_index < runs.size(); ++run_index) {
    const nlohmann::json& run = runs[run_index];
    const std::string backend = run.value("backend", std::string("?"));
    const int world = run.value("world_size", 0);
    std::string baseline;
    if (run.contains("baseline") && run["baseline"].is_object()) {
      baseline = run["baseline"].value("name", std::string());
    }
    // One data file per (op, side), points in the order measured.
    std::vector<std::string> ops;
    for (const nlohmann::json& r : run["results"]) {
      const std::string op = r.value("op", std::string("?"));
      if (op == "barrier") continue;  // no payload: no bandwidth
      if (std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
    }
    // Two runs of one backend (say two machines) need telling apart.
    int same_backend = 0;
    for (size_t k = 0; k < runs.size(); ++k) {
      if (runs[k].value("backend", std::string("?")) == backend) ++same_backend;
    }
    const std::string run_tag =
        same_backend > 1 ? absl::StrCat(" [file ", run_index + 1, "]") : std::string();
    for (const std::string& op : ops) {
      ++color;
      for (bool raw : {false, true}) {
        const std::string file = absl::StrCat(dir, "/s", series.size(), ".dat");
        std::ofstream out(file);
        int points = 0;
        for (const nlohmann::json& r : run["results"]) {
          if (r.value("op", std::string()) != op) continue;
          const nlohmann::json& side = raw ? r.value("raw", nlohmann::json()) : r;
          if (!side.is_object() || !side.contains("busbw_gbps")) continue;
          const double size = r.value("size", 0.0);
          // Log axes: a zero (a too-fast or empty case) cannot be drawn.
          if (size <= 0 || side.value("busbw_gbps", 0.0) <= 0) continue;
          out << size << " " << side.value("busbw_gbps", 0.0) << "\n";
          ++points;
        }
        if (points == 0) continue;
        Series s;
        s.title = raw ? absl::StrCat("raw ", baseline, " ", op, " (", world, " ranks)", run_tag)
                      : absl::StrCat(backend, " ", op, " (", world, " ranks)", run_tag);
        s.color = color;
        s.data_file = file;
        s.raw = raw;
        series.push_back(s);
      }
    }
  }
  if (series.empty()) {
    std::filesystem::remove_all(dir);
    return absl::InvalidArgumentError("nothing to plot: the results have no sized operations");
  }

  const std::string script = absl::StrCat(dir, "/plot.gp");
  {
    std::ofstream gp(script);
    gp << "set terminal pngcairo size 1000,620 noenhanced font \"sans,10\"\n"
       << "set output " << Quote(png_path) << "\n"
       << "set title \"distbench: bus bandwidth vs message size\"\n"
       << "set xlabel \"size (bytes)\"\nset ylabel \"busbw (GB/s)\"\n"
       << "set logscale x 2\nset format x \"%.0b%B\"\n"
       << "set logscale y 10\nset format y \"%g\"\n"
       << "set key top left\nset grid\n";
    std::vector<std::string> plots;
    for (size_t i = 0; i < series.size(); ++i) {
      const Series& s = series[i];
      plots.push_back(absl::StrCat(Quote(s.data_file), " using 1:2 with linespoints linecolor ",
                                   s.color, s.raw ? " dashtype 2 pointtype 6" : " pointtype 7",
                                   " title ", Quote(s.title)));
    }
    gp << "plot " << absl::StrJoin(plots, ", \\\n     ") << "\n";
  }
  absl::Status status = RunGnuplot(script, absl::StrCat(dir, "/gnuplot.log"));
  std::filesystem::remove_all(dir);
  if (!status.ok()) return status;
  if (!std::filesystem::exists(png_path) || std::filesystem::file_size(png_path) == 0) {
    return absl::InternalError(absl::StrCat("gnuplot wrote no image at ", png_path));
  }
  return absl::OkStatus();
}

}  // namespace distbench

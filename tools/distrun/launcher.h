// Runs the ranks of one node and watches them, on a libuv event loop:
// children, their output pipes, SIGINT/SIGTERM and the grace/timeout timers.
//
// Each rank runs in its own process group (session), so a signal distrun
// sends reaches the rank's own children too (a shell script's sleep), and a
// Ctrl-C in the terminal reaches distrun alone, which forwards it once.
#ifndef DIST_TOOLS_DISTRUN_LAUNCHER_H_
#define DIST_TOOLS_DISTRUN_LAUNCHER_H_

#include <uv.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tools/distrun/job.h"

namespace dist::distrun {

class Launcher {
 public:
  // `job` must be valid and have its master port resolved.
  explicit Launcher(Job job);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Starts every rank, waits for all of them and returns distrun's exit
  // code: 0, the first failure's code (128 + signal for a signal), 124 when
  // --timeout expired, 126/127 when the program could not be started.
  int Run();

 private:
  struct Rank;
  struct Stream;
  enum class NextStep { kNone, kTerminate, kKill };

  bool StartRank(Rank& rank);
  // --max_restarts: starts `lost` again as a joining process; false when
  // no restart is left or it could not start.
  bool Restart(const Rank& lost);
  void OnRankExit(Rank& rank, int64_t exit_code, int term_signal);
  void OnStreamClosed();
  void BeginStop(absl::Duration before_terminate, const std::string& why);
  void SendToLiveRanks(int signal);
  void OnStopTimer();
  void OnSignal(int signal);
  void OnTimeout();
  void MaybeFinish();
  void CloseStreams();
  void PrintSummary();
  void Log(const std::string& message);

  Job job_;
  uv_loop_t loop_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  uv_signal_t sigint_, sigterm_, sighup_;
  uv_timer_t stop_timer_, timeout_timer_, drain_timer_;
  NextStep next_step_ = NextStep::kNone;
  bool stopping_ = false;
  bool finished_ = false;
  bool timed_out_ = false;
  int forwarded_signal_ = 0;
  int start_error_code_ = 0;  // 126/127 when a rank could not start
  Rank* first_failure_ = nullptr;
  std::vector<Rank*> lost_;  // --survive: killed by a signal, the others went on
  int restarts_ = 0;         // --max_restarts used so far
  int running_ = 0;
  int open_streams_ = 0;
  absl::Time start_time_;
};

}  // namespace dist::distrun

#endif  // DIST_TOOLS_DISTRUN_LAUNCHER_H_

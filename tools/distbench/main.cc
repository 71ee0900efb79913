// distbench: collective benchmarks for dist backends, in the spirit of
// nccl-tests. See README.md and --help.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "dist/cpp/reduce.hpp"
#include "dist/dist.h"
#include "tools/common/help.h"
#include "tools/distbench/byte_size.h"
#include "tools/distbench/collectives.h"
#include "tools/distbench/launcher.h"
#include "tools/distbench/plot.h"
#include "tools/distbench/report.h"
#include "tools/distbench/run.h"

using distbench::ByteSize;

ABSL_FLAG(ByteSize, b, ByteSize{8}, "smallest size in bytes (8, 1K, 1M, 64M)");
ABSL_FLAG(ByteSize, e, ByteSize{32u << 20}, "largest size in bytes");
ABSL_FLAG(uint64_t, f, 2, "size multiplication factor between rows (>= 2)");
ABSL_FLAG(int, w, 5, "warm-up iterations per size (and per side with --baseline)");
ABSL_FLAG(int, iters, 20, "timed iterations per round");
ABSL_FLAG(int, rounds, 3,
          "timed rounds per size; the median round is reported. With --baseline the rounds "
          "alternate plugin and raw library (A B, B A, ...)");
ABSL_FLAG(int, n, 0,
          "start this many local ranks of distbench itself (env:// on 127.0.0.1); 0: this "
          "process is one rank of a job started by distrun, mpirun or by hand");
ABSL_FLAG(std::string, op, "all_reduce",
          "all_reduce, broadcast, reduce, all_gather, gather, scatter, reduce_scatter, "
          "all_to_all, barrier, sendrecv, a comma-separated list, or all");
ABSL_FLAG(std::string, dtype, "float32",
          "int8, uint8, int32, int64, float16, bfloat16, float32, float64");
ABSL_FLAG(std::string, redop, "sum", "sum, product, min, max, avg, band, bor, bxor");
ABSL_FLAG(int, root, 0, "root rank of broadcast, reduce, gather and scatter");
ABSL_FLAG(bool, check, false,
          "verify every result against a reference computed locally and count wrong elements");
ABSL_FLAG(bool, baseline, false,
          "also run each case through the raw library (Gloo, MPI or NCCL) in the same "
          "processes and add raw time and the plugin/raw ratios");
ABSL_FLAG(std::string, baseline_library, "auto",
          "raw library for --baseline: gloo, mpi, nccl, or auto (the one under --backend)");
ABSL_FLAG(bool, ceiling, false,
          "also time plain TCP over 127.0.0.1 moving each case's bus-bandwidth bytes around a "
          "ring of the same ranks (loopback_tcp), in the same rounds: the transport's ceiling, "
          "and the plugin's busbw as a fraction of it (ranks on one host, --device=cpu)");
ABSL_FLAG(std::string, backend, "",
          "backend name (gloo, mpi, nccl), path to a plugin .so, or a device map "
          "(cpu:gloo,cuda:nccl); empty: DIST_BACKEND or the config file");
ABSL_FLAG(std::string, init_method, "",
          "env://, tcp://host:port?..., file:///path?...; empty: DIST_INIT_METHOD or env://");
ABSL_FLAG(std::vector<std::string>, options, {},
          "backend/rendezvous options for dist_init, comma-separated key=value "
          "(e.g. gloo.ifname=lo,mpi.progress_thread=0)");
ABSL_FLAG(absl::Duration, timeout, absl::ZeroDuration(),
          "timeout of every operation (e.g. 60s); 0: DIST_TIMEOUT or the default");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda (GPU LOCAL_RANK) or cuda:N");
ABSL_FLAG(std::string, csv, "", "also write the results as CSV to this file (rank 0)");
ABSL_FLAG(std::string, json, "", "also write the results as JSON to this file (rank 0)");
ABSL_FLAG(std::string, plot, "",
          "write a PNG of busbw against size (gnuplot) of this run, or of --plot_inputs");
ABSL_FLAG(std::vector<std::string>, plot_inputs, {},
          "comma-separated JSON files from earlier --json runs to plot together with --plot, "
          "without running anything");
ABSL_FLAG(bool, progress, true, "print a line per measured size to stderr (rank 0)");

namespace distbench {
namespace {

absl::StatusOr<dist_device_t> ParseDevice(const std::string& text) {
  if (text == "cpu") return dist_cpu();
  if (text == "cuda") {
    int index = 0;
    const char* local = std::getenv("LOCAL_RANK");
    if (local != nullptr && !absl::SimpleAtoi(local, &index)) index = 0;
    return dist_cuda(index);
  }
  int index = 0;
  if (absl::StartsWith(text, "cuda:") && absl::SimpleAtoi(text.substr(5), &index) && index >= 0) {
    return dist_cuda(index);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --device '", text, "'; use cpu, cuda or cuda:N"));
}

// Everything that can be checked before any rank talks to another.
RunConfig ValidateFlags() {
  RunConfig config;
  auto or_fail = [](auto result) {
    if (!result.ok()) Fail(kUsageError, std::string(result.status().message()));
    return *std::move(result);
  };
  config.ops = or_fail(ParseOps(absl::GetFlag(FLAGS_op)));
  config.dtype = or_fail(ParseDtype(absl::GetFlag(FLAGS_dtype)));
  config.redop = or_fail(ParseRedop(absl::GetFlag(FLAGS_redop)));
  config.bench.device = or_fail(ParseDevice(absl::GetFlag(FLAGS_device)));
  for (const OpInfo* op : config.ops) {
    if (!op->reduces) continue;
    absl::Status valid = dist::ValidateReduceOp(config.dtype, config.redop);
    if (!valid.ok()) Fail(kUsageError, absl::StrCat("--redop/--dtype: ", valid.message()));
    break;
  }
  const uint64_t b = absl::GetFlag(FLAGS_b).bytes;
  const uint64_t e = absl::GetFlag(FLAGS_e).bytes;
  if (b == 0) Fail(kUsageError, "-b must be at least 1 byte");
  if (b > e) {
    Fail(kUsageError, absl::StrCat("-b ", FormatByteSize(b), " is larger than -e ",
                                   FormatByteSize(e), "; make -b <= -e"));
  }
  if (absl::GetFlag(FLAGS_f) < 2) Fail(kUsageError, "-f must be 2 or more");
  if (absl::GetFlag(FLAGS_w) < 0) Fail(kUsageError, "-w must be 0 or more");
  if (absl::GetFlag(FLAGS_iters) < 1) Fail(kUsageError, "--iters must be 1 or more");
  if (absl::GetFlag(FLAGS_rounds) < 1) Fail(kUsageError, "--rounds must be 1 or more");
  if (absl::GetFlag(FLAGS_n) < 0) Fail(kUsageError, "-n must be 0 or more");
  if (absl::GetFlag(FLAGS_root) < 0) Fail(kUsageError, "--root must be 0 or more");
  if (absl::GetFlag(FLAGS_timeout) < absl::ZeroDuration()) {
    Fail(kUsageError, "--timeout must not be negative");
  }
  for (const std::string& option : absl::GetFlag(FLAGS_options)) {
    const size_t eq = option.find('=');
    if (eq == std::string::npos || eq == 0) {
      Fail(kUsageError, absl::StrCat("--options entry '", option, "' is not key=value"));
    }
  }
  const std::string library = absl::GetFlag(FLAGS_baseline_library);
  if (library != "auto" && library != "gloo" && library != "mpi" && library != "nccl") {
    Fail(kUsageError,
         absl::StrCat("unknown --baseline_library '", library, "'; use auto, gloo, mpi or nccl"));
  }
  config.sizes = SweepSizes(b, e, absl::GetFlag(FLAGS_f));
  config.root = absl::GetFlag(FLAGS_root);
  config.bench.warmup = absl::GetFlag(FLAGS_w);
  config.bench.iters = absl::GetFlag(FLAGS_iters);
  config.bench.rounds = absl::GetFlag(FLAGS_rounds);
  config.bench.check = absl::GetFlag(FLAGS_check);
  config.backend = absl::GetFlag(FLAGS_backend);
  config.init_method = absl::GetFlag(FLAGS_init_method);
  config.timeout_ms = absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_timeout));
  for (const std::string& option : absl::GetFlag(FLAGS_options)) {
    const size_t eq = option.find('=');
    config.options.emplace_back(option.substr(0, eq), option.substr(eq + 1));
  }
  config.baseline = absl::GetFlag(FLAGS_baseline);
  config.baseline_library = library;
  config.ceiling = absl::GetFlag(FLAGS_ceiling);
  config.progress = absl::GetFlag(FLAGS_progress);
  config.csv = absl::GetFlag(FLAGS_csv);
  config.json = absl::GetFlag(FLAGS_json);
  config.plot = absl::GetFlag(FLAGS_plot);
  return config;
}

// distbench --plot out.png --plot_inputs a.json,b.json
int PlotOnly() {
  const std::string png = absl::GetFlag(FLAGS_plot);
  if (png.empty()) Fail(kUsageError, "--plot_inputs needs --plot FILE.png");
  std::vector<nlohmann::json> runs;
  for (const std::string& path : absl::GetFlag(FLAGS_plot_inputs)) {
    absl::StatusOr<nlohmann::json> run = ReadJson(path);
    if (!run.ok()) Fail(1, std::string(run.status().message()));
    runs.push_back(*std::move(run));
  }
  absl::Status status = PlotBusBandwidth(png, runs);
  if (!status.ok()) Fail(1, std::string(status.message()));
  std::fprintf(stderr, "distbench: wrote %s\n", png.c_str());
  return 0;
}

}  // namespace
}  // namespace distbench

int main(int argc, char** argv) {
  // --help lists distbench's own flags (not Abseil's), whatever the file
  // names; --helpfull lists all.
  dist::tools::SetToolUsage("distbench", absl::StrCat("distbench (dist ", dist_version(), ")\n"));
  absl::SetProgramUsageMessage(
      "collective benchmarks for dist backends, in the spirit of nccl-tests.\n"
      "\n"
      "  distbench -n 2 --backend gloo --op all_reduce -b 8 -e 64M --check\n"
      "  distrun -n 4 distbench --op all --baseline --json gloo.json\n"
      "  mpirun -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29500 distbench --backend mpi "
      "--baseline\n"
      "  distbench --plot busbw.png --plot_inputs gloo.json,mpi.json\n"
      "\n"
      "Each rank is started by distrun, mpirun, by hand (env:// variables) or by -n.\n"
      "Rank 0 prints a table per operation: size(B), count, type, redop, root, time(us),\n"
      "algbw and busbw (GB/s, nccl-tests' definitions) and #wrong (with --check).");
  if (dist::tools::WantsHelp(argc, argv)) dist::tools::PrintHelpAndExit(argv[0]);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    distbench::Fail(distbench::kUsageError,
                    absl::StrCat("unexpected argument '", positional[1],
                                 "'; distbench takes flags only (see --help)"));
  }
  if (!absl::GetFlag(FLAGS_plot_inputs).empty()) return distbench::PlotOnly();
  const distbench::RunConfig config = distbench::ValidateFlags();
  if (const int ranks = absl::GetFlag(FLAGS_n); ranks > 0) {
    distbench::LaunchOptions launch;
    launch.ranks = ranks;
    for (int i = 1; i < argc; ++i) launch.args.push_back(argv[i]);
    launch.args.push_back("--n=0");
    return distbench::LaunchLocalRanks(launch);
  }
  return distbench::RunRank(config);
}

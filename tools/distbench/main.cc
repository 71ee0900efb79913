// distbench: collective benchmarks for dist backends, in the spirit of
// nccl-tests. See README.md and --help.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/reduce.hpp"
#include "dist/cpp/status.hpp"
#include "dist/dist.h"
#include "dist/registry.h"
#include "tools/distbench/baseline.h"
#include "tools/distbench/bench.h"
#include "tools/distbench/byte_size.h"
#include "tools/distbench/collectives.h"
#include "tools/distbench/launcher.h"
#include "tools/distbench/plot.h"
#include "tools/distbench/report.h"

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

constexpr int kUsageError = 2;

// One line on stderr, then exit.
[[noreturn]] void Fail(int code, const std::string& message) {
  std::fprintf(stderr, "distbench: %s\n", message.c_str());
  std::fflush(stdout);
  std::exit(code);
}

struct Config {
  std::vector<const OpInfo*> ops;
  dist_dtype_t dtype = DIST_FLOAT32;
  dist_reduce_op_t redop = DIST_SUM;
  dist_device_t device{DIST_DEVICE_CPU, 0};
  std::vector<uint64_t> sizes;
};

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
Config ValidateFlags() {
  Config config;
  auto or_fail = [](auto result) {
    if (!result.ok()) Fail(kUsageError, std::string(result.status().message()));
    return *std::move(result);
  };
  config.ops = or_fail(ParseOps(absl::GetFlag(FLAGS_op)));
  config.dtype = or_fail(ParseDtype(absl::GetFlag(FLAGS_dtype)));
  config.redop = or_fail(ParseRedop(absl::GetFlag(FLAGS_redop)));
  config.device = or_fail(ParseDevice(absl::GetFlag(FLAGS_device)));
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
    Fail(kUsageError, absl::StrCat("unknown --baseline_library '", library,
                                   "'; use auto, gloo, mpi or nccl"));
  }
  config.sizes = SweepSizes(b, e, absl::GetFlag(FLAGS_f));
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

std::string Hostname() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

std::string DeviceText(dist_device_t device) {
  return device.type == DIST_DEVICE_CPU ? "cpu" : absl::StrCat("cuda:", device.index);
}

int EnvInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  int value = fallback;
  if (text == nullptr || !absl::SimpleAtoi(text, &value)) return fallback;
  return value;
}

const dist_plugin_info_t* FindBackendInfo(const std::string& name) {
  const dist_plugin_info_t* infos = nullptr;
  size_t count = 0;
  dist_error_t* error = dist_list_plugins(&infos, &count);
  if (error != nullptr) {
    dist_error_destroy(error);
    return nullptr;
  }
  for (size_t i = 0; i < count; ++i) {
    if (infos[i].kind == DIST_PLUGIN_BACKEND && infos[i].status == DIST_PLUGIN_OK &&
        name == infos[i].name) {
      return &infos[i];
    }
  }
  return nullptr;
}

// Why the backend cannot run `c`, from its declared capabilities, or "".
// Depends on the case only, so every rank decides alike.
std::string Unsupported(const dist_plugin_info_t* info, const std::string& backend,
                        const OpInfo& op, dist_dtype_t dtype, dist_reduce_op_t redop) {
  if (info == nullptr) return "";
  const dist_backend_capabilities_t& caps = info->capabilities;
  auto has = [](uint32_t mask, int bit) { return (mask & (1u << bit)) != 0; };
  if (!has(caps.collectives, op.collective) ||
      (op.op == Op::kSendRecv && !has(caps.collectives, DIST_COLL_RECV))) {
    return absl::StrCat("backend ", backend, " does not implement ", op.name);
  }
  if (op.op != Op::kBarrier && !has(caps.dtypes, dtype)) {
    return absl::StrCat("backend ", backend, " does not support ", dist_dtype_name(dtype));
  }
  if (op.reduces) {
    const uint32_t mask = op.op == Op::kAllReduce ? caps.all_reduce_ops
                          : op.op == Op::kReduce  ? caps.reduce_ops
                                                  : caps.reduce_scatter_ops;
    if (!has(mask, redop)) {
      return absl::StrCat("backend ", backend, " has no ", dist_reduce_op_name(redop), " for ",
                          op.name);
    }
  }
  return "";
}

int RunRank(const Config& config) {
  const int rank_hint = EnvInt("RANK", EnvInt("OMPI_COMM_WORLD_RANK", -1));
  const std::string who = rank_hint >= 0 ? absl::StrCat("rank ", rank_hint, ": ") : "";
  const std::string backend_flag = absl::GetFlag(FLAGS_backend);
  const std::string init_flag = absl::GetFlag(FLAGS_init_method);
  dist_init_options_t init = dist_init_options_default();
  init.backend = backend_flag.empty() ? nullptr : backend_flag.c_str();
  init.init_method = init_flag.empty() ? nullptr : init_flag.c_str();
  init.timeout_ms = absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_timeout));
  init.group_name = "distbench";
  std::vector<std::pair<std::string, std::string>> option_text;
  for (const std::string& option : absl::GetFlag(FLAGS_options)) {
    const size_t eq = option.find('=');
    option_text.emplace_back(option.substr(0, eq), option.substr(eq + 1));
  }
  std::vector<dist_kv_t> kvs;
  for (const auto& [key, value] : option_text) kvs.push_back({key.c_str(), value.c_str()});
  init.options = kvs.empty() ? nullptr : kvs.data();
  init.num_options = kvs.size();
  dist_process_group_t* pg = nullptr;
  if (dist_error_t* error = dist_init(&init, &pg)) {
    const std::string message = dist_error_message(error);
    dist_error_destroy(error);
    Fail(1, absl::StrCat(who, message));
  }
  const int rank = dist_rank(pg);
  const int world = dist_world_size(pg);
  const std::string fail_prefix = absl::StrCat("rank ", rank, ": ");
  const char* backend_name = dist_backend_name(pg, config.device.type);
  if (backend_name == nullptr) {
    dist_destroy(pg);
    Fail(kUsageError, absl::StrCat(fail_prefix, "no backend of this group serves --device=",
                                   DeviceText(config.device), "; pick a backend for it with --backend"));
  }
  if (absl::GetFlag(FLAGS_root) >= world) {
    dist_destroy(pg);
    Fail(kUsageError, absl::StrCat(fail_prefix, "--root ", absl::GetFlag(FLAGS_root),
                                   " is not a rank of this world of ", world));
  }

  RunInfo info;
  info.backend = backend_name;
  const dist_plugin_info_t* plugin = FindBackendInfo(info.backend);
  if (plugin != nullptr) {
    info.backend_version = plugin->version != nullptr ? plugin->version : "";
    info.library_version = plugin->library_version != nullptr ? plugin->library_version : "";
  }
  info.init_method = init_flag.empty()
                         ? (std::getenv("DIST_INIT_METHOD") ? std::getenv("DIST_INIT_METHOD") : "env://")
                         : init_flag;
  info.device = DeviceText(config.device);
  info.host = Hostname();
  info.dist_version = dist_version();
  info.world_size = world;
  info.warmup = absl::GetFlag(FLAGS_w);
  info.iters = absl::GetFlag(FLAGS_iters);
  info.rounds = absl::GetFlag(FLAGS_rounds);
  info.check = absl::GetFlag(FLAGS_check);
  info.baseline_requested = absl::GetFlag(FLAGS_baseline);
  info.date = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());

  std::unique_ptr<Baseline> baseline;
  if (info.baseline_requested) {
    BaselineSetup setup;
    setup.pg = pg;
    setup.rank = rank;
    setup.world_size = world;
    setup.local_rank = EnvInt("LOCAL_RANK", EnvInt("OMPI_COMM_WORLD_LOCAL_RANK", -1));
    setup.local_world_size = EnvInt("LOCAL_WORLD_SIZE", EnvInt("OMPI_COMM_WORLD_LOCAL_SIZE", -1));
    setup.device = config.device;
    setup.timeout_ms = dist_timeout_ms(pg);
    absl::StatusOr<std::unique_ptr<Baseline>> made =
        MakeBaseline(absl::GetFlag(FLAGS_baseline_library), setup);
    if (made.ok()) {
      baseline = *std::move(made);
      info.baseline = baseline->name();
      info.baseline_library = baseline->description();
    } else {
      info.baseline_skipped = std::string(made.status().message());
    }
  }

  BenchOptions options;
  options.warmup = info.warmup;
  options.iters = info.iters;
  options.rounds = info.rounds;
  options.check = info.check;
  options.device = config.device;
  Bench bench(pg, options, baseline.get());

  const bool printer = rank == 0;
  const bool progress = printer && absl::GetFlag(FLAGS_progress);
  TablePrinter table(stdout, info);
  if (printer) table.PrintHeader();

  // The cases, in order; sizes too small for an op (less than one element
  // per rank) or equal to the previous one after rounding are left out.
  std::vector<std::pair<const OpInfo*, std::vector<uint64_t>>> plan;
  size_t total = 0;
  for (const OpInfo* op : config.ops) {
    std::vector<uint64_t> blocks;
    if (op->op == Op::kBarrier) {
      blocks.push_back(0);
    } else {
      for (uint64_t size : config.sizes) {
        const uint64_t block = BlockForBytes(*op, config.dtype, world, size);
        if (block == 0 || (!blocks.empty() && blocks.back() == block)) continue;
        blocks.push_back(block);
      }
    }
    total += blocks.size();
    plan.emplace_back(op, blocks);
  }

  std::vector<Row> rows;
  const absl::Time start = absl::Now();
  size_t done = 0;
  int exit_code = 0;
  for (const auto& [op, blocks] : plan) {
    const std::string unsupported =
        Unsupported(plugin, info.backend, *op, config.dtype, config.redop);
    if (!unsupported.empty()) {
      if (printer) table.PrintSkipped(*op, unsupported);
      done += blocks.size();
      continue;
    }
    if (blocks.empty()) {
      if (printer) table.PrintSkipped(*op, "every size is below one element per rank; raise -e");
      continue;
    }
    if (printer) table.BeginOp(*op);
    for (uint64_t block : blocks) {
      Case c;
      c.op = op;
      c.dtype = config.dtype;
      c.redop = config.redop;
      c.root = absl::GetFlag(FLAGS_root);
      c.rank = rank;
      c.world_size = world;
      c.block = block;
      absl::StatusOr<Row> row = bench.Run(c);
      if (!row.ok()) {
        std::fflush(stdout);
        baseline.reset();
        dist_abort(pg, "distbench stopped after an error");
        dist_destroy(pg);
        Fail(1, absl::StrCat(fail_prefix, op->name, " ", c.bytes(), " B: ", row.status().message()));
      }
      if (printer) table.PrintRow(*row);
      if (row->plugin.wrong > 0) exit_code = 1;
      rows.push_back(*std::move(row));
      ++done;
      if (progress) {
        std::fprintf(stderr, "distbench: %s %s done (%zu/%zu, %.1f s)\n", op->name,
                     FormatByteSize(c.bytes()).c_str(), done, total,
                     absl::ToDoubleSeconds(absl::Now() - start));
      }
    }
  }
  baseline.reset();
  dist_destroy(pg);

  if (printer) {
    table.PrintFooter(rows);
    if (const std::string csv = absl::GetFlag(FLAGS_csv); !csv.empty()) {
      absl::Status status = WriteCsv(csv, info, rows);
      if (!status.ok()) Fail(1, std::string(status.message()));
    }
    if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
      absl::Status status = WriteJson(json, info, rows);
      if (!status.ok()) Fail(1, std::string(status.message()));
    }
    if (const std::string png = absl::GetFlag(FLAGS_plot); !png.empty()) {
      absl::Status status = PlotBusBandwidth(png, {ToJson(info, rows)});
      if (!status.ok()) Fail(1, std::string(status.message()));
    }
  }
  if (exit_code != 0 && printer) {
    std::fprintf(stderr, "distbench: wrong results (see #wrong); failing\n");
  }
  return exit_code;
}

}  // namespace
}  // namespace distbench

int main(int argc, char** argv) {
  // --help lists distbench's own flags (not Abseil's), whatever the file
  // names; --helpfull lists all.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "distbench");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] { return absl::StrCat("distbench (dist ", dist_version(), ")\n"); };
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "collective benchmarks for dist backends, in the spirit of nccl-tests.\n"
      "\n"
      "  distbench -n 2 --backend gloo --op all_reduce -b 8 -e 64M --check\n"
      "  distrun -n 4 distbench --op all --baseline --json gloo.json\n"
      "  mpirun -np 2 distbench --backend mpi --baseline\n"
      "  distbench --plot busbw.png --plot_inputs gloo.json,mpi.json\n"
      "\n"
      "Each rank is started by distrun, mpirun, by hand (env:// variables) or by -n.\n"
      "Rank 0 prints a table per operation: size(B), count, type, redop, root, time(us),\n"
      "algbw and busbw (GB/s, nccl-tests' definitions) and #wrong (with --check).");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    distbench::Fail(distbench::kUsageError,
                    absl::StrCat("unexpected argument '", positional[1],
                                 "'; distbench takes flags only (see --help)"));
  }
  if (!absl::GetFlag(FLAGS_plot_inputs).empty()) return distbench::PlotOnly();
  const distbench::Config config = distbench::ValidateFlags();
  if (const int ranks = absl::GetFlag(FLAGS_n); ranks > 0) {
    distbench::LaunchOptions launch;
    launch.ranks = ranks;
    for (int i = 1; i < argc; ++i) launch.args.push_back(argv[i]);
    launch.args.push_back("--n=0");
    return distbench::LaunchLocalRanks(launch);
  }
  return distbench::RunRank(config);
}

#include "tools/distbench/run.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dist/cpp/status.hpp"
#include "dist/dist.h"
#include "dist/registry.h"
#include "tools/distbench/baseline.h"
#include "tools/distbench/byte_size.h"
#include "tools/distbench/ceiling.h"
#include "tools/distbench/group_util.h"
#include "tools/distbench/plot.h"
#include "tools/distbench/report.h"

namespace distbench {

void Fail(int code, const std::string& message) {
  std::fprintf(stderr, "distbench: %s\n", message.c_str());
  std::fflush(stdout);
  std::exit(code);
}

namespace {

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

}  // namespace

int RunRank(const RunConfig& config) {
  const int rank_hint = EnvInt("RANK", EnvInt("OMPI_COMM_WORLD_RANK", -1));
  const std::string who = rank_hint >= 0 ? absl::StrCat("rank ", rank_hint, ": ") : "";
  const std::string& backend_flag = config.backend;
  const std::string& init_flag = config.init_method;
  dist_init_options_t init = dist_init_options_default();
  init.backend = backend_flag.empty() ? nullptr : backend_flag.c_str();
  init.init_method = init_flag.empty() ? nullptr : init_flag.c_str();
  init.timeout_ms = config.timeout_ms;
  init.group_name = "distbench";
  std::vector<dist_kv_t> kvs;
  for (const auto& [key, value] : config.options) kvs.push_back({key.c_str(), value.c_str()});
  init.options = kvs.empty() ? nullptr : kvs.data();
  init.num_options = kvs.size();
  dist_process_group_t* pg = nullptr;
  const absl::Time init_start = absl::Now();
  dist_error_t* init_error = dist_init(&init, &pg);
  const double init_ms = absl::ToDoubleMilliseconds(absl::Now() - init_start);
  if (dist_error_t* error = init_error) {
    const std::string message = dist_error_message(error);
    dist_error_destroy(error);
    Fail(1, absl::StrCat(who, message));
  }
  const int rank = dist_rank(pg);
  const int world = dist_world_size(pg);
  const std::string fail_prefix = absl::StrCat("rank ", rank, ": ");
  const char* backend_name = dist_backend_name(pg, config.bench.device.type);
  if (backend_name == nullptr) {
    dist_destroy(pg);
    Fail(kUsageError,
         absl::StrCat(fail_prefix, "no backend of this group serves --device=",
                      DeviceText(config.bench.device), "; pick a backend for it with --backend"));
  }
  if (config.root >= world) {
    dist_destroy(pg);
    Fail(kUsageError, absl::StrCat(fail_prefix, "--root ", config.root,
                                   " is not a rank of this world of ", world));
  }

  RunInfo info;
  info.backend = backend_name;
  info.init_method = init_flag.empty() ? (std::getenv("DIST_INIT_METHOD")
                                              ? std::getenv("DIST_INIT_METHOD")
                                              : "default (mpi:// for MPI backends, else env://)")
                                       : init_flag;
  info.device = DeviceText(config.bench.device);
  info.host = Hostname();
  info.dist_version = dist_version();
  info.world_size = world;
  info.warmup = config.bench.warmup;
  info.iters = config.bench.iters;
  info.rounds = config.bench.rounds;
  info.check = config.bench.check;
  info.baseline_requested = config.baseline;
  info.ceiling_requested = config.ceiling;
  info.date = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  {
    // Start-up cost: dist_init on the slowest rank, and the fastest rank's
    // (the difference is mostly when each process started); and from the
    // last rank's call on (report.h). One all-reduce of maxima: the
    // fastest is minus the largest negation, and milliseconds since the
    // epoch fit a double to well under a microsecond.
    const double called_ms = absl::ToDoubleMilliseconds(init_start - absl::UnixEpoch());
    absl::StatusOr<std::vector<double>> maxima = AllReduceDoubles(
        pg, config.bench.device, {init_ms, -init_ms, called_ms, called_ms + init_ms}, DIST_MAX);
    if (maxima.ok()) {
      info.init_ms_max = (*maxima)[0];
      info.init_ms_min = -(*maxima)[1];
      info.init_ms_after_last_call = (*maxima)[3] - (*maxima)[2];
    }
  }
  // After the start-up figures are in (the all-reduces above wait for every
  // rank's dist_init): listing the plugins loads every one (NCCL with the
  // CUDA runtime, both MPIs), work that must not compete with ranks still
  // in dist_init.
  const dist_plugin_info_t* plugin = FindBackendInfo(info.backend);
  if (plugin != nullptr) {
    info.backend_version = plugin->version != nullptr ? plugin->version : "";
    info.library_version = plugin->library_version != nullptr ? plugin->library_version : "";
  }

  BaselineSetup setup;
  setup.pg = pg;
  setup.rank = rank;
  setup.world_size = world;
  setup.local_rank = EnvInt("LOCAL_RANK", EnvInt("OMPI_COMM_WORLD_LOCAL_RANK", -1));
  setup.local_world_size = EnvInt("LOCAL_WORLD_SIZE", EnvInt("OMPI_COMM_WORLD_LOCAL_SIZE", -1));
  setup.device = config.bench.device;
  setup.timeout_ms = dist_timeout_ms(pg);
  std::unique_ptr<Baseline> baseline;
  if (info.baseline_requested) {
    absl::StatusOr<std::unique_ptr<Baseline>> made = MakeBaseline(config.baseline_library, setup);
    if (made.ok()) {
      baseline = *std::move(made);
      info.baseline = baseline->name();
      info.baseline_library = baseline->description();
    } else {
      info.baseline_skipped = std::string(made.status().message());
    }
  }
  std::unique_ptr<LoopbackCeiling> ceiling;
  if (info.ceiling_requested) {
    absl::StatusOr<std::unique_ptr<LoopbackCeiling>> made = LoopbackCeiling::Make(setup);
    if (made.ok()) {
      ceiling = *std::move(made);
      info.ceiling = ceiling->description();
    } else {
      info.ceiling_skipped = std::string(made.status().message());
    }
  }

  Bench bench(pg, config.bench, baseline.get(), ceiling.get());

  const bool printer = rank == 0;
  const bool progress = printer && config.progress;
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
        op->op == Op::kSendRecv && world < 2
            ? "sendrecv needs 2 or more ranks (a rank cannot send to itself)"
            : Unsupported(plugin, info.backend, *op, config.dtype, config.redop);
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
      c.root = config.root;
      c.rank = rank;
      c.world_size = world;
      c.block = block;
      absl::StatusOr<Row> row = bench.Run(c);
      if (!row.ok()) {
        std::fflush(stdout);
        baseline.reset();
        ceiling.reset();
        dist_abort(pg, "distbench stopped after an error");
        dist_destroy(pg);
        Fail(1,
             absl::StrCat(fail_prefix, op->name, " ", c.bytes(), " B: ", row.status().message()));
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
  ceiling.reset();
  dist_destroy(pg);

  if (printer) {
    table.PrintFooter(rows);
    if (!config.csv.empty()) {
      absl::Status status = WriteCsv(config.csv, info, rows);
      if (!status.ok()) Fail(1, std::string(status.message()));
    }
    if (!config.json.empty()) {
      absl::Status status = WriteJson(config.json, info, rows);
      if (!status.ok()) Fail(1, std::string(status.message()));
    }
    if (!config.plot.empty()) {
      absl::Status status = PlotBusBandwidth(config.plot, {ToJson(info, rows)});
      if (!status.ok()) Fail(1, std::string(status.message()));
    }
  }
  if (exit_code != 0 && printer) {
    std::fprintf(stderr, "distbench: wrong results (see #wrong); failing\n");
  }
  return exit_code;
}

}  // namespace distbench

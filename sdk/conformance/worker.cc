#include "sdk/conformance/worker.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dist/cpp/status.hpp"

namespace dist::conformance {
namespace {

// A rank or size from the first launcher variable that is set.
int32_t FromEnvironment(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    int32_t parsed = 0;
    if (value != nullptr && absl::SimpleAtoi(value, &parsed)) return parsed;
  }
  return -1;
}

std::string Mask(uint32_t mask, int count, const char* (*name)(int)) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) {
    if (mask & (1u << i)) names.push_back(name(i));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

std::string Describe(const LoadedPlugin& plugin) {
  const dist_backend_capabilities_t& c = plugin.caps;
  return absl::StrCat(
      plugin.table->name, " ", plugin.table->version, " (ABI ", plugin.table->abi_major, ".",
      plugin.table->abi_minor, ", ", plugin.table->library_version(), "): dtypes ",
      Mask(c.dtypes, DIST_DTYPE_COUNT,
           [](int i) { return dist_dtype_name(static_cast<dist_dtype_t>(i)); }),
      "; collectives ",
      Mask(c.collectives, DIST_COLLECTIVE_COUNT,
           [](int i) { return dist_collective_name(static_cast<dist_collective_t>(i)); }),
      "; all_reduce ops ",
      Mask(c.all_reduce_ops, DIST_REDUCE_OP_COUNT,
           [](int i) { return dist_reduce_op_name(static_cast<dist_reduce_op_t>(i)); }),
      "; devices ",
      Mask(c.device_types, DIST_DEVICE_TYPE_COUNT,
           [](int i) { return dist_device_type_name(static_cast<dist_device_type_t>(i)); }),
      "; flags 0x", absl::Hex(c.flags));
}

int Finish(const Report& report, const WorkerOptions& options, int32_t rank) {
  if (options.results_file.empty() && options.results_dir.empty() && rank <= 0) {
    PrintTable(report.rows(), options.only_failures, stdout);
  }
  return report.failed() > 0 ? 1 : 0;
}

}  // namespace

int RunWorker(const WorkerOptions& options) {
  Rendezvous rendezvous;
  rendezvous.url = options.url;
  rendezvous.rank =
      options.rank >= 0
          ? options.rank
          : FromEnvironment({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "RANK"});
  rendezvous.world_size = options.world_size > 0
                              ? options.world_size
                              : FromEnvironment({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"});
  rendezvous.timeout_ms = std::max<int64_t>(options.suite.op_timeout_ms, 60000);
  rendezvous.group_timeout_ms = options.suite.op_timeout_ms;
  std::string results_file = options.results_file;
  if (results_file.empty() && !options.results_dir.empty()) {
    results_file = absl::StrCat(options.results_dir, "/rank", rendezvous.rank, ".tsv");
  }
  Report report(results_file);

  absl::StatusOr<LoadedPlugin> plugin = LoadPlugin(options.plugin);
  if (absl::IsUnavailable(plugin.status())) {
    // The core ran the plugin's probe: it cannot run here (no GPU, ...).
    // Every check is skipped, with the reason.
    report.Add(Row{"probe: the backend can run here", "-", "-", "-", Outcome::kSkip,
                   plugin.status().ToString()});
    if (rendezvous.rank <= 0) std::printf("SKIP: %s\n", plugin.status().ToString().c_str());
    return Finish(report, options, rendezvous.rank);
  }
  if (!plugin.ok()) {
    report.Add(Row{"load the plugin (dist_load_backend)", "-", "-", "-", Outcome::kFail,
                   plugin.status().ToString()});
    return Finish(report, options, rendezvous.rank);
  }
  report.Add(
      Row{"load the plugin (dist_load_backend)", "-", "-", "-", Outcome::kPass, Describe(*plugin)});
  absl::Status probe = TakeError(plugin->table->probe());
  if (!probe.ok()) {
    // Cannot run here (no GPU, ...): every check is skipped, with the reason.
    report.Add(
        Row{"probe: the backend can run here", "-", "-", "-", Outcome::kSkip, probe.ToString()});
    if (rendezvous.rank <= 0) std::printf("SKIP: %s\n", probe.ToString().c_str());
    return Finish(report, options, rendezvous.rank);
  }
  absl::StatusOr<std::unique_ptr<Comm>> comm = options.through_core
                                                   ? CreateCoreComm(options.plugin, rendezvous)
                                                   : CreateAbiComm(*plugin, rendezvous);
  report.Add(Row{
      options.through_core ? "dist_init (through the core)" : "rendezvous + comm_create (raw ABI)",
      "-", "-", "-", comm.ok() ? Outcome::kPass : Outcome::kFail,
      comm.ok() ? absl::StrCat("rank ", (*comm)->rank(), " of ", (*comm)->world_size())
                : comm.status().ToString()});
  if (!comm.ok()) return Finish(report, options, rendezvous.rank);
  SuiteOptions suite_options = options.suite;
  suite_options.through_core = options.through_core;
  Suite suite(**comm, *plugin, suite_options, report);
  suite.Run();
  const int32_t rank = (*comm)->rank();
  comm->reset();  // comm_destroy / dist_destroy must return too
  return Finish(report, options, rank);
}

}  // namespace dist::conformance

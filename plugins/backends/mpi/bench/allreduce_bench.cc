// Raw MPI_Allreduce vs the MPI plugin's all_reduce (issue + work_wait through
// the ABI table), float32 sum, interleaved in one run so both see the same
// machine. A third column, raw MPI_Iallreduce + MPI_Test with the libnbc
// algorithm the plugin picks, separates the plugin's own cost from the
// choice of algorithm. Prints time per op (max over ranks, median of rounds), bus
// bandwidth (2(W-1)/W * bytes / time), the plugin/raw bandwidth ratio of the
// medians and of the best rounds, and the time the plugin adds.
//
//   mpirun -np 2 allreduce_bench [--plugin=PATH] [--max_bytes=N] [--rounds=N]
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "dist/backend_plugin.h"

ABSL_FLAG(std::string, plugin, "", "libdist-backend-openmpi.so (default: from runfiles)");
ABSL_FLAG(int64_t, min_bytes, 8,
          "smallest message (of 8 B, 64 B, ..., 1 MiB, 4 MiB, 16 MiB, 64 MiB)");
ABSL_FLAG(int64_t, max_bytes, 64 << 20, "largest message");
ABSL_FLAG(int, rounds, 7, "alternating raw/plugin rounds per size; the median is reported");
ABSL_FLAG(bool, progress_thread, true, "plugin option mpi.progress_thread");
ABSL_FLAG(double, round_seconds, 0.05, "target time of one round");

namespace {

int g_rank = 0;
int g_size = 1;

void Die(const char* what, dist_error_t* error) {
  std::fprintf(stderr, "rank %d: %s: %s\n", g_rank, what, dist_error_message(error));
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void Log(dist_log_level_t, const char*, const char*) {}
int LogEnabled(dist_log_level_t) { return 0; }
dist_error_t* NoPrefix(const dist_store_t*, const char*, dist_store_t**) {
  return dist_error_new(DIST_UNIMPLEMENTED, "bench host: no stores");
}

const dist_backend_plugin_t* Load(std::string path, const char* argv0) {
  if (path.empty()) {
    path = std::string(argv0) + ".runfiles/dist/plugins/backends/mpi/libdist-backend-openmpi.so";
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  auto entry =
      reinterpret_cast<dist_backend_plugin_entry_fn>(dlsym(handle, DIST_BACKEND_ENTRY_SYMBOL));
  const dist_backend_plugin_t* plugin = entry();
  static const dist_host_api_t host = {
      sizeof(dist_host_api_t), 1, 1, "bench", &Log, &LogEnabled, &NoPrefix};
  if (dist_error_t* e = plugin->initialize(&host)) Die("initialize", e);
  return plugin;
}

// The plugin's libnbc choice (see nbc_tuning.h), for the raw
// non-blocking column.
MPI_T_cvar_handle g_algorithm = MPI_T_CVAR_HANDLE_NULL;

void InitAlgorithmControl() {
  int provided = 0;
  int index = -1;
  int count = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) return;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &g_algorithm, &count) != MPI_SUCCESS) {
    g_algorithm = MPI_T_CVAR_HANDLE_NULL;
  }
}

void SetAlgorithm(int value) {
  if (g_algorithm != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_write(g_algorithm, &value);
}

// Seconds per op over `iters` ops, the slowest rank's.
template <typename Op>
double Time(int iters, Op op) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) op();
  double elapsed = (MPI_Wtime() - start) / iters;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return elapsed;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  int provided = 0;
  // The host initializes MPI (the plugin then leaves init and finalize to
  // it) at the level the plugin would ask for itself.
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const dist_backend_plugin_t* plugin = Load(absl::GetFlag(FLAGS_plugin), argv[0]);
  InitAlgorithmControl();

  dist_comm_config_t config;
  std::memset(&config, 0, sizeof(config));
  config.struct_size = sizeof(config);
  config.rank = g_rank;
  config.world_size = g_size;
  config.local_rank = -1;
  config.local_world_size = -1;
  config.timeout_ms = 60000;
  config.group_name = "bench";
  config.device_index = -1;
  const dist_kv_t options[] = {
      {"mpi.progress_thread", absl::GetFlag(FLAGS_progress_thread) ? "1" : "0"}};
  config.options = options;
  config.num_options = 1;
  dist_backend_comm_t* comm = nullptr;
  if (dist_error_t* e = plugin->comm_create(&config, &comm)) Die("comm_create", e);

  const size_t max_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_bytes));
  std::vector<float> send(max_bytes / sizeof(float) + 1), recv(send.size());
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<float>((i % 7) + g_rank);

  if (g_rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::printf("# %d ranks, float32 sum, %s\n# plugin: %s %s via %s\n", g_size,
                std::string(version, strcspn(version, "\n")).c_str(), plugin->name, plugin->version,
                plugin->library_version());
    std::printf("%10s %9s %9s %9s %9s %9s %9s %7s %7s %7s %8s\n", "bytes", "raw_us", "nb_us",
                "plugin_us", "raw_GB/s", "nb_GB/s", "plug_GB/s", "ratio", "best", "vs_nb",
                "added_us");
  }
  std::vector<size_t> sizes;
  for (size_t bytes :
       {8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}) {
    if (bytes >= static_cast<size_t>(absl::GetFlag(FLAGS_min_bytes)) && bytes <= max_bytes) {
      sizes.push_back(bytes);
    }
  }
  for (size_t bytes : sizes) {
    const int count = static_cast<int>(bytes / sizeof(float) ? bytes / sizeof(float) : 1);
    const size_t real_bytes = count * sizeof(float);
    auto raw = [&] {
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    const bool ring = g_size > 1 && g_size < 4 && real_bytes >= 1024;
    auto raw_nonblocking = [&] {
      MPI_Request request;
      if (ring) SetAlgorithm(1);
      MPI_Iallreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
      if (ring) SetAlgorithm(0);
      int done = 0;
      while (!done) MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    };
    dist_op_args_t args;
    std::memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.send = dist_make_buffer(send.data(), count, DIST_FLOAT32, dist_cpu());
    args.recv = dist_make_buffer(recv.data(), count, DIST_FLOAT32, dist_cpu());
    args.op = DIST_SUM;
    auto through_plugin = [&] {
      dist_backend_work_t* work = nullptr;
      if (dist_error_t* e = plugin->all_reduce(comm, &args, &work)) Die("all_reduce", e);
      if (dist_error_t* e = plugin->work_wait(work, 60000)) Die("work_wait", e);
      plugin->work_destroy(work);
    };
    // Calibrate the iteration count on the raw op, warm both up.
    double probe = Time(3, raw);
    Time(3, through_plugin);
    int iters = static_cast<int>(absl::GetFlag(FLAGS_round_seconds) / std::max(probe, 1e-7));
    iters = std::clamp(iters, 3, 200000);
    MPI_Bcast(&iters, 1, MPI_INT, 0, MPI_COMM_WORLD);
    Time(3, raw_nonblocking);
    std::vector<double> raw_times, nb_times, plugin_times;
    for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      raw_times.push_back(Time(iters, raw));
      nb_times.push_back(Time(iters, raw_nonblocking));
      plugin_times.push_back(Time(iters, through_plugin));
    }
    const double raw_t = Median(raw_times);
    const double nb_t = Median(nb_times);
    const double plugin_t = Median(plugin_times);
    const double factor = 2.0 * (g_size - 1) / g_size;
    const double raw_bw = factor * real_bytes / raw_t / 1e9;
    const double plugin_bw = factor * real_bytes / plugin_t / 1e9;
    // Best-of-rounds too: on a shared machine the fastest round of each is
    // the least disturbed one.
    const double best_ratio = *std::min_element(raw_times.begin(), raw_times.end()) /
                              *std::min_element(plugin_times.begin(), plugin_times.end());
    if (g_rank == 0) {
      std::printf("%10zu %9.2f %9.2f %9.2f %9.3f %9.3f %9.3f %7.3f %7.3f %7.3f %8.2f\n", real_bytes,
                  raw_t * 1e6, nb_t * 1e6, plugin_t * 1e6, raw_bw, factor * real_bytes / nb_t / 1e9,
                  plugin_bw, plugin_bw / raw_bw, best_ratio, nb_t / plugin_t,
                  (plugin_t - raw_t) * 1e6);
      std::fflush(stdout);
    }
  }
  plugin->comm_destroy(comm);
  if (g_algorithm != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_handle_free(&g_algorithm);
  MPI_T_finalize();
  MPI_Finalize();
  return 0;
}

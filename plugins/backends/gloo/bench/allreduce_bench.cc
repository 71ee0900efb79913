// Side-by-side all_reduce benchmark: raw Gloo (gloo::allreduce called
// directly) and this plugin's all_reduce called through the ABI table
// (issue + work_wait + work_destroy), in the same processes, the same run,
// interleaved round by round (alternating which goes first) so that
// machine noise hits both alike.
//
//   bazel run -c opt //plugins/backends/gloo/bench:allreduce_bench -- --ranks=2
//
// Ranks are forked processes on loopback. Reports time per call, bus
// bandwidth (nccl-tests: algbw * 2 * (n-1) / n) and plugin/raw ratios.
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "dist/backend_plugin.h"
#include "gloo/allreduce.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"
#include "plugins/store/abi_store.h"
#include "plugins/store/file_store.h"

ABSL_FLAG(int, ranks, 2, "number of ranks (forked processes on loopback)");
ABSL_FLAG(int64_t, min_bytes, 8, "smallest message");
ABSL_FLAG(int64_t, max_bytes, 64 << 20, "largest message");
ABSL_FLAG(int, rounds, 7, "interleaved rounds per size (median reported)");
ABSL_FLAG(std::string, algorithm, "ring", "Gloo allreduce algorithm for both sides: ring or bcube");
ABSL_FLAG(
    bool, compare_algorithms, false,
    "instead: raw Gloo ring vs raw Gloo bcube, interleaved (for the plugin's size threshold)");
ABSL_FLAG(std::string, plugin, "", "path of libdist-backend-gloo.so (default: from runfiles)");

namespace {

using Clock = std::chrono::steady_clock;

std::string PluginPath(const char* argv0) {
  if (!absl::GetFlag(FLAGS_plugin).empty()) return absl::GetFlag(FLAGS_plugin);
  const char* srcdir = std::getenv("TEST_SRCDIR");
  if (srcdir == nullptr) srcdir = std::getenv("RUNFILES_DIR");
  const std::string base = srcdir ? srcdir : absl::StrCat(argv0, ".runfiles");
  return absl::StrCat(base, "/dist/plugins/backends/gloo/libdist-backend-gloo.so");
}

const dist_backend_plugin_t* LoadPlugin(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), dlerror());
    std::exit(2);
  }
  auto entry =
      reinterpret_cast<dist_backend_plugin_entry_fn>(dlsym(handle, DIST_BACKEND_ENTRY_SYMBOL));
  const dist_backend_plugin_t* plugin = entry();
  static const dist_host_api_t host = {
      sizeof(dist_host_api_t),
      1,
      1,
      "bench",
      [](dist_log_level_t, const char* c, const char* m) {
        std::fprintf(stderr, "[%s] %s\n", c, m);
      },
      [](dist_log_level_t level) { return level <= DIST_LOG_WARN ? 1 : 0; },
      [](const dist_store_t*, const char*, dist_store_t**) -> dist_error_t* {
        return dist_error_new(DIST_UNIMPLEMENTED, "bench host: no prefix stores");
      }};
  if (plugin->initialize(&host) != nullptr) std::exit(2);
  return plugin;
}

void Check(dist_error_t* error, const char* what) {
  if (error == nullptr) return;
  std::fprintf(stderr, "%s: %s\n", what, dist_error_message(error));
  std::exit(1);
}

struct Side {
  double seconds_per_call = 0;
};

int Iterations(size_t bytes) {
  return static_cast<int>(
      std::clamp<size_t>((size_t{32} << 20) / std::max<size_t>(bytes, 1), 3, 300));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int RunRank(int rank, int world, const std::string& dir, const dist_backend_plugin_t* plugin) {
  const bool bcube = absl::GetFlag(FLAGS_algorithm) == "bcube";
  // Raw Gloo: its own file store, a loopback TCP device, a full mesh.
  gloo::rendezvous::FileStore raw_store(dir + "/raw");
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto raw = std::make_shared<gloo::rendezvous::Context>(rank, world);
  raw->setTimeout(std::chrono::seconds(60));
  raw->connectFullMesh(raw_store, device);

  // The plugin: a communicator through the ABI over a dist file store.
  auto make_comm = [&](const char* sub) {
    dist::store::FileStoreOptions options;
    options.path = dir + sub;
    options.max_poll_interval = absl::Milliseconds(2);
    dist_store_t* store =
        dist::store::MakeAbiStore(*dist::store::FileStore::Open(options), absl::Seconds(60));
    static std::vector<dist_kv_t>* kvs = new std::vector<dist_kv_t>;
    kvs->clear();
    kvs->push_back({"gloo.allreduce_algorithm", bcube ? "bcube" : "ring"});
    dist_comm_config_t config;
    std::memset(&config, 0, sizeof(config));
    config.struct_size = sizeof(config);
    config.rank = rank;
    config.world_size = world;
    config.local_rank = rank;
    config.local_world_size = world;
    config.store = store;
    config.timeout_ms = 60000;
    config.options = kvs->data();
    config.num_options = kvs->size();
    config.group_name = "bench";
    config.device_index = -1;
    dist_backend_comm_t* comm = nullptr;
    Check(plugin->comm_create(&config, &comm), "comm_create");
    return comm;
  };
  dist_backend_comm_t* comm = make_comm("/plugin");

  const size_t max_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_bytes));
  std::vector<float> in(max_bytes / sizeof(float) + 1, 1.0f + rank), out(in.size());

  auto raw_call = [&](size_t n) {
    gloo::AllreduceOptions opts(raw);
    opts.setInput(in.data(), n);
    opts.setOutput(out.data(), n);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setAlgorithm(bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                            : gloo::AllreduceOptions::Algorithm::RING);
    opts.setTag(0);
    gloo::allreduce(opts);
  };
  auto plugin_call = [&](dist_backend_comm_t* c, size_t n) {
    dist_op_args_t args;
    std::memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.send = dist_make_buffer(in.data(), n, DIST_FLOAT32, dist_cpu());
    args.recv = dist_make_buffer(out.data(), n, DIST_FLOAT32, dist_cpu());
    args.op = DIST_SUM;
    dist_backend_work_t* work = nullptr;
    Check(plugin->all_reduce(c, &args, &work), "all_reduce");
    Check(plugin->work_wait(work, 60000), "work_wait");
    plugin->work_destroy(work);
  };
  auto timed = [](int iters, const auto& call) {
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) call();
    return std::chrono::duration<double>(Clock::now() - start).count() / iters;
  };

  if (absl::GetFlag(FLAGS_compare_algorithms)) {
    if (rank == 0) {
      std::printf(
          "# raw Gloo all_reduce float32 sum, %d ranks over loopback: ring vs bcube, median of %d "
          "rounds\n",
          world, absl::GetFlag(FLAGS_rounds));
      std::printf("%10s %7s %12s %12s %10s\n", "bytes", "iters", "ring_us", "bcube_us",
                  "bcube/ring");
    }
    for (size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_min_bytes)); bytes <= max_bytes;
         bytes *= 4) {
      const size_t n = std::max<size_t>(bytes / sizeof(float), 1);
      const int iters = Iterations(bytes);
      auto call = [&](bool use_bcube) {
        gloo::AllreduceOptions opts(raw);
        opts.setInput(in.data(), n);
        opts.setOutput(out.data(), n);
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
        opts.setAlgorithm(use_bcube ? gloo::AllreduceOptions::Algorithm::BCUBE
                                    : gloo::AllreduceOptions::Algorithm::RING);
        gloo::allreduce(opts);
      };
      std::vector<double> ring_t, bcube_t;
      for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
        ring_t.push_back(timed(iters, [&] { call(false); }));
        bcube_t.push_back(timed(iters, [&] { call(true); }));
      }
      if (rank == 0) {
        const double r = Median(ring_t), b = Median(bcube_t);
        std::printf("%10zu %7d %12.2f %12.2f %10.3f\n", n * sizeof(float), iters, r * 1e6, b * 1e6,
                    b / r);
        std::fflush(stdout);
      }
    }
    plugin->comm_destroy(comm);
    return 0;
  }
  if (rank == 0) {
    std::printf(
        "# all_reduce float32 sum, %d ranks over loopback, algorithm %s, median of %d interleaved "
        "rounds\n",
        world, bcube ? "bcube" : "ring", absl::GetFlag(FLAGS_rounds));
    std::printf(
        "# medians; min_* are the best round of each side; ratio = plugin busbw / raw busbw\n");
    std::printf("%10s %7s %12s %12s %10s %10s %8s %10s %11s %11s %10s\n", "bytes", "iters",
                "raw_us", "plugin_us", "raw_GB/s", "plug_GB/s", "ratio", "added_us", "min_raw_us",
                "min_plug_us", "min_added");
  }
  const double bus_factor = 2.0 * (world - 1) / world;
  for (size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_min_bytes)); bytes <= max_bytes;
       bytes *= 4) {
    const size_t n = std::max<size_t>(bytes / sizeof(float), 1);
    const int iters = Iterations(bytes);
    for (int i = 0; i < 3; ++i) {  // warm up both paths
      raw_call(n);
      plugin_call(comm, n);
    }
    std::vector<double> raw_t, plugin_t;
    for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      // Alternate which side goes first, so that neither always runs warm.
      if (round % 2 == 0) raw_t.push_back(timed(iters, [&] { raw_call(n); }));
      plugin_t.push_back(timed(iters, [&] { plugin_call(comm, n); }));
      if (round % 2 == 1) raw_t.push_back(timed(iters, [&] { raw_call(n); }));
    }
    if (out[0] != (world * (world + 1)) / 2.0f) {
      std::fprintf(stderr, "wrong result %f\n", out[0]);
      return 1;
    }
    if (rank == 0) {
      const double r = Median(raw_t), p = Median(plugin_t);
      const double actual = static_cast<double>(n * sizeof(float));
      const double raw_bw = actual / r * bus_factor / 1e9,
                   plugin_bw = actual / p * bus_factor / 1e9;
      const double rmin = *std::min_element(raw_t.begin(), raw_t.end());
      const double pmin = *std::min_element(plugin_t.begin(), plugin_t.end());
      std::printf("%10zu %7d %12.2f %12.2f %10.3f %10.3f %8.3f %10.2f %11.2f %11.2f %10.2f",
                  n * sizeof(float), iters, r * 1e6, p * 1e6, raw_bw, plugin_bw, plugin_bw / raw_bw,
                  (p - r) * 1e6, rmin * 1e6, pmin * 1e6, (pmin - rmin) * 1e6);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  plugin->comm_destroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int world = absl::GetFlag(FLAGS_ranks);
  const dist_backend_plugin_t* plugin = LoadPlugin(PluginPath(argv[0]));
  char pattern[] = "/tmp/gloo-bench-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  mkdir((dir + "/raw").c_str(), 0700);
  std::fflush(stdout);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) std::_Exit(RunRank(rank, world, dir, plugin));
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  std::string cleanup = absl::StrCat("rm -rf '", dir, "'");
  if (std::system(cleanup.c_str()) != 0) failed = 1;
  return failed;
}

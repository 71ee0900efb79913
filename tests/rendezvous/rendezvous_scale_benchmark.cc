// Benchmark (not a test): how long N ranks take to rendezvous through one
// store, with the real client code and many simulated ranks per process.
//
//   bazel run -c opt //tests/rendezvous:rendezvous_scale_benchmark --
//       --ranks=1024,8192 --file_ranks=64,256
//
// Each simulated rank has its own client and connection (tcp://) or its own
// open of the file (file://), and does what a rank does in dist_init: open
// the store (for tcp://: connect and the authenticated handshake), then the
// core's join (core/join_check.cc): claim the world size and its rank with
// compare_set, count itself in with add, the last one sets the completion
// key, and every rank waits for it. `--threads` worker threads drive the
// ranks, each a slice of them phase by phase (every rank of the slice does
// its non-blocking steps before the slice waits), so one process holds
// thousands of ranks without thousands of threads. Time runs from the first
// connect to the last rank's wait returning, against one store server on
// loopback (with a token, as distrun sets one). The raw floor printed with
// it is the same number of plain loopback TCP connects plus one 64-byte
// round trip each, in the same run.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "plugins/store/file_store.h"
#include "plugins/store/tcp_store_client.h"
#include "plugins/store/tcp_store_server.h"

ABSL_FLAG(std::vector<std::string>, ranks, std::vector<std::string>({"1024", "8192"}),
          "world sizes for tcp://");
ABSL_FLAG(std::vector<std::string>, file_ranks, std::vector<std::string>({"64", "256"}),
          "world sizes for file://");
ABSL_FLAG(int, threads, 16, "worker threads driving the simulated ranks");
ABSL_FLAG(int, repeats, 3, "runs per world size (the median is shown)");
ABSL_FLAG(std::string, token, "benchmark-token", "store token (empty: none)");
ABSL_FLAG(std::string, dir, "/tmp", "directory for the file:// store");

namespace dist::store {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(120);

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The core's join for `rank`, minus the final wait.
absl::Status Arrive(Store& store, int rank, int world) {
  absl::StatusOr<std::string> size =
      store.CompareSet("dist/join/world_size", std::nullopt, std::to_string(world));
  if (!size.ok()) return size.status();
  absl::StatusOr<std::string> owner = store.CompareSet(absl::StrCat("dist/join/rank/", rank),
                                                       std::nullopt, absl::StrCat("rank", rank));
  if (!owner.ok()) return owner.status();
  absl::StatusOr<int64_t> arrived = store.Add("dist/join/arrived", 1);
  if (!arrived.ok()) return arrived.status();
  if (*arrived == world) return store.Set("dist/join/complete", "1");
  return absl::OkStatus();
}

struct Result {
  double seconds = -1;
  std::string error;
};

// `world` ranks on `threads` threads: open (tcp: connect + handshake), arrive,
// wait, each phase over the thread's slice of ranks.
Result Rendezvous(int world, int threads,
                  const std::function<absl::StatusOr<std::unique_ptr<Store>>(int rank)>& open) {
  threads = std::min(threads, world);
  std::atomic<bool> failed{false};
  std::string error;
  absl::Mutex error_mu;
  auto fail = [&](const absl::Status& status) {
    absl::MutexLock lock(&error_mu);
    if (!failed.exchange(true)) error = status.ToString();
  };
  absl::Barrier* start = new absl::Barrier(threads + 1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::unique_ptr<Store>> stores;
      std::vector<int> ranks;
      for (int rank = t; rank < world; rank += threads) ranks.push_back(rank);
      if (start->Block()) delete start;
      for (int rank : ranks) {
        absl::StatusOr<std::unique_ptr<Store>> store = open(rank);
        if (!store.ok()) return fail(store.status());
        stores.push_back(*std::move(store));
      }
      for (size_t i = 0; i < ranks.size(); ++i) {
        absl::Status arrived = Arrive(*stores[i], ranks[i], world);
        if (!arrived.ok()) return fail(arrived);
      }
      for (auto& store : stores) {
        absl::Status waited = store->Wait({"dist/join/complete"}, kTimeout);
        if (!waited.ok()) return fail(waited);
      }
    });
  }
  // The workers are started (threads exist) before the clock runs.
  const absl::Time begin = absl::Now();
  if (start->Block()) delete start;
  for (std::thread& worker : workers) worker.join();
  Result result;
  if (failed) {
    result.error = error;
  } else {
    result.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  }
  return result;
}

Result TcpRendezvous(int world, int threads) {
  TcpStoreServerOptions options;
  options.bind_host = "127.0.0.1";
  options.token = absl::GetFlag(FLAGS_token);
  absl::StatusOr<std::unique_ptr<TcpStoreServer>> server = TcpStoreServer::Start(options);
  if (!server.ok()) return Result{-1, server.status().ToString()};
  const int port = (*server)->port();
  return Rendezvous(world, threads, [port](int) -> absl::StatusOr<std::unique_ptr<Store>> {
    TcpStoreClientOptions client;
    client.host = "127.0.0.1";
    client.port = port;
    client.token = absl::GetFlag(FLAGS_token);
    client.timeout = kTimeout;
    absl::StatusOr<std::unique_ptr<TcpStoreClient>> connected = TcpStoreClient::Connect(client);
    if (!connected.ok()) return connected.status();
    return std::unique_ptr<Store>(std::move(*connected));
  });
}

Result FileRendezvous(int world, int threads) {
  static int job = 0;
  const std::string path =
      absl::StrCat(absl::GetFlag(FLAGS_dir), "/dist_scale_benchmark.", getpid(), ".", job++);
  Result result =
      Rendezvous(world, threads, [&](int rank) -> absl::StatusOr<std::unique_ptr<Store>> {
        FileStoreOptions options;
        options.path = path;
        options.rank = rank;
        options.world_size = world;
        options.timeout = kTimeout;
        options.max_poll_interval = absl::Milliseconds(5);
        absl::StatusOr<std::unique_ptr<FileStore>> store = FileStore::Open(options);
        if (!store.ok()) return store.status();
        return std::unique_ptr<Store>(std::move(*store));
      });
  unlink(path.c_str());  // the stores are released already: normally gone
  return result;
}

// `world` plain loopback connects and one 64-byte round trip on each,
// `threads` threads: the floor under any TCP rendezvous of that size.
double RawFloor(int world, int threads) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  listen(listener, 65535);
  std::thread echo([&] {
    std::vector<int> fds;
    char buffer[64];
    for (int i = 0; i < world; ++i) {
      const int fd = accept(listener, nullptr, nullptr);
      size_t got = 0;
      while (got < sizeof(buffer)) {
        const ssize_t n = recv(fd, buffer + got, sizeof(buffer) - got, 0);
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      send(fd, buffer, sizeof(buffer), MSG_NOSIGNAL);
      fds.push_back(fd);
    }
    for (int fd : fds) close(fd);
  });
  const absl::Time begin = absl::Now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<int> fds;
      char buffer[64] = {0};
      for (int rank = t; rank < world; rank += threads) {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
        send(fd, buffer, sizeof(buffer), MSG_NOSIGNAL);
        size_t got = 0;
        while (got < sizeof(buffer)) {
          const ssize_t n = recv(fd, buffer + got, sizeof(buffer) - got, 0);
          if (n <= 0) break;
          got += static_cast<size_t>(n);
        }
        fds.push_back(fd);
      }
      for (int fd : fds) close(fd);
    });
  }
  for (std::thread& worker : workers) worker.join();
  echo.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  close(listener);
  return seconds;
}

void Run(const char* scheme, const std::vector<std::string>& sizes,
         Result (*rendezvous)(int, int)) {
  const int threads = absl::GetFlag(FLAGS_threads);
  for (const std::string& text : sizes) {
    const int world = std::stoi(text);
    std::vector<double> runs, floors;
    std::string error;
    for (int i = 0; i < absl::GetFlag(FLAGS_repeats) && error.empty(); ++i) {
      const Result result = rendezvous(world, threads);
      if (result.seconds < 0) error = result.error;
      runs.push_back(result.seconds);
      if (std::string(scheme) == "tcp") floors.push_back(RawFloor(world, threads));
    }
    if (!error.empty()) {
      printf("| %s | %d | failed: %s | | |\n", scheme, world, error.c_str());
    } else if (floors.empty()) {
      printf("| %s | %d | %.3f | - | - |\n", scheme, world, Median(runs));
    } else {
      printf("| %s | %d | %.3f | %.3f | %.1f |\n", scheme, world, Median(runs), Median(floors),
             Median(runs) / Median(floors));
    }
    fflush(stdout);
  }
}

}  // namespace
}  // namespace dist::store

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Rendezvous time of N simulated ranks through one store.");
  absl::ParseCommandLine(argc, argv);
  // Two sockets per simulated rank live in this process (client and server).
  rlimit files;
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  printf("cores: %u, worker threads: %d, token: %s, median of %d\n\n",
         std::thread::hardware_concurrency(), absl::GetFlag(FLAGS_threads),
         absl::GetFlag(FLAGS_token).empty() ? "none" : "yes", absl::GetFlag(FLAGS_repeats));
  printf("| store | ranks | rendezvous (s) | raw connects + 1 RTT each (s) | ratio |\n");
  printf("|---|---:|---:|---:|---:|\n");
  dist::store::Run("tcp", absl::GetFlag(FLAGS_ranks), dist::store::TcpRendezvous);
  dist::store::Run("file", absl::GetFlag(FLAGS_file_ranks), dist::store::FileRendezvous);
  return 0;
}

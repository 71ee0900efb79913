// Benchmark (not a test): how long a rendezvous takes against world size,
// with N simulated ranks (threads, each with its own client connection)
// against one TCP store server on loopback, and store operations per
// second. The raw baseline is a plain loopback TCP round trip measured in
// the same run, so store latency is reported as a ratio against it.
//
//   bazel run -c opt //tests/rendezvous:store_benchmark -- --max_world=1024
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "plugins/store/file_store.h"
#include "plugins/store/tcp_store_client.h"
#include "plugins/store/tcp_store_server.h"

ABSL_FLAG(int, max_world, 1024, "largest simulated world size for the TCP store");
ABSL_FLAG(int, max_file_world, 64, "largest simulated world size for the file store");
ABSL_FLAG(double, ops_seconds, 1.0, "seconds per ops/s measurement");
ABSL_FLAG(std::vector<std::string>, ops, std::vector<std::string>({"set", "get", "add"}),
          "operations to measure");
ABSL_FLAG(int, repeats, 3, "rendezvous repeats per world size (the median is shown)");

namespace dist::store {
namespace {

// What the core's join check (core/join_check.cc) does on the store, per
// rank: claim the world size and the rank with compare_set, count arrivals;
// the last rank to arrive sets one completion key that every rank waits on.
absl::Status JoinLikeTheCore(Store& store, int rank, int world) {
  absl::StatusOr<std::string> size =
      store.CompareSet("dist/join/world_size", std::nullopt, std::to_string(world));
  if (!size.ok()) return size.status();
  absl::StatusOr<std::string> owner = store.CompareSet(absl::StrCat("dist/join/rank/", rank),
                                                       std::nullopt, absl::StrCat("rank", rank));
  if (!owner.ok()) return owner.status();
  absl::StatusOr<int64_t> arrived = store.Add("dist/join/arrived", 1);
  if (!arrived.ok()) return arrived.status();
  if (*arrived == world) {
    absl::Status set = store.Set("dist/join/complete", "1");
    if (!set.ok()) return set;
  }
  return store.Wait({"dist/join/complete"}, absl::Seconds(120));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds for `world` threads to connect and join; -1 on failure.
double TcpRendezvous(int world) {
  TcpStoreServerOptions options;
  options.bind_host = "127.0.0.1";
  auto server = TcpStoreServer::Start(options);
  if (!server.ok()) return -1;
  absl::Notification go;
  std::atomic<int> failures{0};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      go.WaitForNotification();
      TcpStoreClientOptions client_options;
      client_options.host = "127.0.0.1";
      client_options.port = (*server)->port();
      client_options.timeout = absl::Seconds(120);
      auto client = TcpStoreClient::Connect(client_options);
      if (!client.ok() || !JoinLikeTheCore(**client, rank, world).ok()) ++failures;
    });
  }
  const absl::Time start = absl::Now();
  go.Notify();
  for (std::thread& t : ranks) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return failures.load() == 0 ? seconds : -1;
}

double FileRendezvous(int world) {
  static int job = 0;
  const std::string path = absl::StrCat("/tmp/dist_store_benchmark.", getpid(), ".", job++);
  absl::Notification go;
  std::atomic<int> failures{0};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      go.WaitForNotification();
      FileStoreOptions options;
      options.path = path;
      options.rank = rank;
      options.world_size = world;
      options.timeout = absl::Seconds(120);
      auto store = FileStore::Open(options);
      if (!store.ok() || !JoinLikeTheCore(**store, rank, world).ok()) ++failures;
    });
  }
  const absl::Time start = absl::Now();
  go.Notify();
  for (std::thread& t : ranks) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  unlink(path.c_str());
  return failures.load() == 0 ? seconds : -1;
}

// Total operations per second over `threads` clients for one kind of op.
double OpsPerSecond(Store* (*make)(int), const std::string& op, int threads) {
  const absl::Duration span = absl::Seconds(absl::GetFlag(FLAGS_ops_seconds));
  std::vector<std::unique_ptr<Store>> stores;
  for (int t = 0; t < threads; ++t) stores.emplace_back(make(t));
  for (auto& s : stores) {
    if (!s) return -1;
  }
  (void)stores[0]->Set("bench/key", std::string(64, 'v'));
  std::atomic<int64_t> total{0};
  absl::Notification go;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Store& store = *stores[t];
      const std::string key = absl::StrCat("bench/", t);
      const std::string value(64, 'x');
      go.WaitForNotification();
      const absl::Time end = absl::Now() + span;
      int64_t done = 0;
      while (absl::Now() < end) {
        for (int i = 0; i < 16; ++i) {
          if (op == "set") (void)store.Set(key, value);
          if (op == "get") (void)store.Get("bench/key", absl::Seconds(5));
          if (op == "add") (void)store.Add("bench/counter", 1);
        }
        done += 16;
      }
      total += done;
    });
  }
  const absl::Time start = absl::Now();
  go.Notify();
  for (std::thread& w : workers) w.join();
  return static_cast<double>(total.load()) / absl::ToDoubleSeconds(absl::Now() - start);
}

std::unique_ptr<TcpStoreServer> g_server;
std::string g_file;

Store* MakeTcpClient(int) {
  TcpStoreClientOptions options;
  options.host = "127.0.0.1";
  options.port = g_server->port();
  auto client = TcpStoreClient::Connect(options);
  return client.ok() ? client->release() : nullptr;
}

Store* MakeFileStore(int) {
  FileStoreOptions options;
  options.path = g_file;
  auto store = FileStore::Open(options);
  return store.ok() ? store->release() : nullptr;
}

// Round trip of a 64-byte message over a plain loopback TCP connection to
// an echo thread: the floor under any request/response store.
double RawRoundTripMicros() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  listen(listener, 1);
  std::thread echo([listener] {
    const int fd = accept(listener, nullptr, nullptr);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buffer[64];
    while (true) {
      size_t got = 0;
      while (got < sizeof(buffer)) {
        const ssize_t n = recv(fd, buffer + got, sizeof(buffer) - got, 0);
        if (n <= 0) {
          close(fd);
          return;
        }
        got += n;
      }
      send(fd, buffer, sizeof(buffer), MSG_NOSIGNAL);
    }
  });
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  char buffer[64] = {0};
  int64_t trips = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(absl::GetFlag(FLAGS_ops_seconds));
  while (absl::Now() < end) {
    send(fd, buffer, sizeof(buffer), MSG_NOSIGNAL);
    size_t got = 0;
    while (got < sizeof(buffer)) got += recv(fd, buffer + got, sizeof(buffer) - got, 0);
    ++trips;
  }
  const double micros = absl::ToDoubleMicroseconds(absl::Now() - start) / trips;
  close(fd);
  echo.join();
  close(listener);
  return micros;
}

}  // namespace
}  // namespace dist::store

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Rendezvous time vs world size, and store ops/s.");
  absl::ParseCommandLine(argc, argv);
  using namespace dist::store;
  // 2 sockets per simulated rank in one process.
  rlimit files;
  getrlimit(RLIMIT_NOFILE, &files);
  files.rlim_cur = files.rlim_max;
  setrlimit(RLIMIT_NOFILE, &files);
  printf("cores: %u\n\n", std::thread::hardware_concurrency());

  printf("## Rendezvous time (connect + the core's join protocol), median of %d\n\n",
         absl::GetFlag(FLAGS_repeats));
  printf("| world size | tcp store (ms) | file store (ms) |\n|---:|---:|---:|\n");
  for (int world = 1; world <= absl::GetFlag(FLAGS_max_world); world *= 2) {
    std::vector<double> tcp, file;
    for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
      tcp.push_back(TcpRendezvous(world) * 1e3);
      if (world <= absl::GetFlag(FLAGS_max_file_world)) file.push_back(FileRendezvous(world) * 1e3);
    }
    printf("| %d | %.1f | %s |\n", world, Median(tcp),
           file.empty() ? "-" : absl::StrCat(static_cast<int>(Median(file) * 10) / 10.0).c_str());
    fflush(stdout);
  }

  const double raw_us = RawRoundTripMicros();
  printf("\n## Store operations per second (64-byte values)\n\n");
  printf("raw loopback TCP round trip (64 bytes, same run): %.1f us\n\n", raw_us);
  TcpStoreServerOptions options;
  options.bind_host = "127.0.0.1";
  g_server = *TcpStoreServer::Start(options);
  g_file = absl::StrCat("/tmp/dist_store_benchmark_ops.", getpid());
  printf("| store | op | clients | ops/s | latency (us) | latency / raw RTT |\n");
  printf("|---|---|---:|---:|---:|---:|\n");
  for (const char* store : {"tcp", "file"}) {
    for (const std::string& op : absl::GetFlag(FLAGS_ops)) {
      for (int threads : {1, 8, 32}) {
        const double ops =
            OpsPerSecond(std::string(store) == "tcp" ? MakeTcpClient : MakeFileStore, op, threads);
        const double latency_us = threads * 1e6 / ops;
        printf("| %s | %s | %d | %.0f | %.1f | %.2f |\n", store, op.c_str(), threads, ops,
               latency_us, latency_us / raw_us);
        fflush(stdout);
      }
    }
  }
  g_server.reset();
  unlink(g_file.c_str());
  return 0;
}

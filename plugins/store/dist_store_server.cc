// dist_store_server: a standalone TCP store, for jobs whose rank 0 should not
// host the store (tcp://host:port?external=1). Runs until SIGINT or SIGTERM.
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "plugins/store/tcp_store_server.h"

ABSL_FLAG(std::string, host, "",
          "address to listen on (IP literal or host name); empty: every interface");
ABSL_FLAG(int, port, 29500, "TCP port; 0 lets the kernel pick one (see --port_file)");
ABSL_FLAG(std::string, token, "",
          "shared secret clients must present; default: $DIST_STORE_TOKEN, else none");
ABSL_FLAG(std::string, port_file, "",
          "if set, write the port actually bound to this file once listening");
ABSL_FLAG(bool, quiet, false, "do not log dropped or refused clients");
// The limits (TcpStoreServerLimits; plugins/store/README.md). The defaults
// serve a job of 8,192 ranks with room to spare.
ABSL_FLAG(int, max_pending_connections, dist::store::TcpStoreServerLimits().max_pending_connections,
          "connections not yet authenticated; when full the oldest is dropped");
ABSL_FLAG(int, max_connections, dist::store::TcpStoreServerLimits().max_connections,
          "authenticated connections; when full the least recently active idle one is "
          "evicted for a newcomer");
ABSL_FLAG(absl::Duration, handshake_timeout, dist::store::TcpStoreServerLimits().handshake_timeout,
          "a connection that has not authenticated by then is dropped");
ABSL_FLAG(absl::Duration, stall_timeout, dist::store::TcpStoreServerLimits().stall_timeout,
          "a request must arrive whole, and a reply be read, within this time");
ABSL_FLAG(uint64_t, max_request_bytes, dist::store::TcpStoreServerLimits().max_request_bytes,
          "largest request; larger ones are refused unread");
ABSL_FLAG(uint64_t, max_keys_per_request, dist::store::TcpStoreServerLimits().max_keys_per_request,
          "keys in one check/wait");
ABSL_FLAG(uint64_t, max_buffered_bytes, dist::store::TcpStoreServerLimits().max_buffered_bytes,
          "bytes held for all clients together (partial requests, parked keys, unsent "
          "replies); past it the server stops reading until it drains");
ABSL_FLAG(uint64_t, max_store_bytes, dist::store::TcpStoreServerLimits().max_store_bytes,
          "keys plus values stored; a set beyond it is refused");
ABSL_FLAG(int, max_log_lines, dist::store::TcpStoreServerLimits().max_log_lines,
          "refusals and drops logged per 10 s (the rest are counted)");
ABSL_FLAG(int, fd_reserve, dist::store::TcpStoreServerLimits().fd_reserve,
          "descriptors left free below the open-files limit (a newcomer that would take "
          "one makes room or is refused); -1: a quarter of the limit, at least 64");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A dist key-value store server.\n"
      "Usage: dist_store_server [--host=ADDR] [--port=29500] [--token=SECRET]\n"
      "Ranks connect with init method tcp://HOST:PORT?external=1&rank=R&world_size=N.");
  absl::ParseCommandLine(argc, argv);
  // Big replies and requests come and go: a fixed mmap threshold hands
  // their memory back to the system when they are freed (glibc's adaptive
  // one would keep them on the heap).
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);

  // Block the stop signals before the server thread starts, so only sigwait
  // below sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  dist::store::TcpStoreServerOptions options;
  options.bind_host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.token = absl::GetFlag(FLAGS_token);
  dist::store::TcpStoreServerLimits& limits = options.limits;
  limits.max_pending_connections = absl::GetFlag(FLAGS_max_pending_connections);
  limits.max_connections = absl::GetFlag(FLAGS_max_connections);
  limits.handshake_timeout = absl::GetFlag(FLAGS_handshake_timeout);
  limits.stall_timeout = absl::GetFlag(FLAGS_stall_timeout);
  limits.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  limits.max_keys_per_request = absl::GetFlag(FLAGS_max_keys_per_request);
  limits.max_buffered_bytes = absl::GetFlag(FLAGS_max_buffered_bytes);
  limits.max_store_bytes = absl::GetFlag(FLAGS_max_store_bytes);
  limits.max_log_lines = absl::GetFlag(FLAGS_max_log_lines);
  limits.fd_reserve = absl::GetFlag(FLAGS_fd_reserve);
  if (absl::Status checked = dist::store::CheckLimits(limits); !checked.ok()) {
    fprintf(stderr, "dist_store_server: %s (see --help)\n", std::string(checked.message()).c_str());
    return 2;
  }
  if (options.token.empty()) {
    if (const char* env = getenv("DIST_STORE_TOKEN")) options.token = env;
  }
  if (options.port < 0 || options.port > 65535) {
    fprintf(stderr, "dist_store_server: --port=%d is not a TCP port; use 0..65535\n", options.port);
    return 2;
  }
  if (!absl::GetFlag(FLAGS_quiet)) {
    options.log = [](const std::string& line) {
      fprintf(stderr, "dist_store_server: %s\n", line.c_str());
    };
  }
  auto server = dist::store::TcpStoreServer::Start(options);
  if (!server.ok()) {
    fprintf(stderr, "dist_store_server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    // Write then rename, so a reader never sees a half-written port; the
    // temporary is a new file (mkstemp), so in a shared directory (/tmp) a
    // link planted under a predictable name is never followed.
    std::string temp = port_file + ".tmp.XXXXXX";
    const int fd = mkstemp(temp.data());
    const std::string port = absl::StrCat((*server)->port(), "\n");
    if (fd < 0 || fchmod(fd, 0644) != 0 ||
        write(fd, port.data(), port.size()) != static_cast<ssize_t>(port.size()) ||
        close(fd) != 0 || rename(temp.c_str(), port_file.c_str()) != 0) {
      fprintf(stderr, "dist_store_server: cannot write --port_file %s: %s\n", port_file.c_str(),
              strerror(errno));
      if (fd >= 0) unlink(temp.c_str());
      return 1;
    }
  }
  fprintf(stderr, "dist_store_server: listening on %s%s\n", (*server)->address().c_str(),
          options.token.empty() ? "" : " (token required)");
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  fprintf(stderr, "dist_store_server: stopping (signal %d), %lld requests served\n", signal_number,
          static_cast<long long>((*server)->requests_served()));
  (*server)->Stop();
  return 0;
}

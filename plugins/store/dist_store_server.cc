// dist_store_server: a standalone TCP store, for jobs whose rank 0 should not
// host the store (tcp://host:port?external=1). Runs until SIGINT or SIGTERM.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "plugins/store/tcp_store_server.h"

ABSL_FLAG(std::string, host, "",
          "address to listen on (IP literal or host name); empty: every interface");
ABSL_FLAG(int, port, 29500, "TCP port; 0 lets the kernel pick one (see --port_file)");
ABSL_FLAG(std::string, token, "",
          "shared secret clients must present; default: $DIST_STORE_TOKEN, else none");
ABSL_FLAG(std::string, port_file, "",
          "if set, write the port actually bound to this file once listening");
ABSL_FLAG(bool, quiet, false, "do not log dropped or refused clients");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A dist key-value store server.\n"
      "Usage: dist_store_server [--host=ADDR] [--port=29500] [--token=SECRET]\n"
      "Ranks connect with init method tcp://HOST:PORT?external=1&rank=R&world_size=N.");
  absl::ParseCommandLine(argc, argv);

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
  if (options.token.empty()) {
    if (const char* env = getenv("DIST_STORE_TOKEN")) options.token = env;
  }
  if (options.port < 0 || options.port > 65535) {
    fprintf(stderr, "dist_store_server: --port=%d is not a TCP port; use 0..65535\n",
            options.port);
    return 2;
  }
  if (!absl::GetFlag(FLAGS_quiet)) {
    options.log = [](const std::string& line) {
      fprintf(stderr, "dist_store_server: %s\n", line.c_str());
    };
  }
  auto server = dist::store::TcpStoreServer::Start(options);
  if (!server.ok()) {
    fprintf(stderr, "dist_store_server: %s\n",
            std::string(server.status().message()).c_str());
    return 1;
  }
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    // Write then rename, so a reader never sees a half-written port.
    const std::string temp = port_file + ".tmp";
    std::ofstream(temp) << (*server)->port() << "\n";
    rename(temp.c_str(), port_file.c_str());
  }
  fprintf(stderr, "dist_store_server: listening on %s%s\n", (*server)->address().c_str(),
          options.token.empty() ? "" : " (token required)");
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  fprintf(stderr, "dist_store_server: stopping (signal %d), %lld requests served\n",
          signal_number, static_cast<long long>((*server)->requests_served()));
  (*server)->Stop();
  return 0;
}

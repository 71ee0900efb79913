// TcpStoreServer itself (Start, Stop, Adopt, clients(), failure(),
// WaitForClientsToLeave) and its loop's life: binding and listening, running,
// stopping and adopting sockets. The rest of the loop is in the server_*.cc
// files (tcp_store_server_loop.h lists them).
#include "plugins/store/tcp_store_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "plugins/store/net.h"
#include "plugins/store/server_limits.h"
#include "plugins/store/tcp_store_server_loop.h"

namespace dist::store {
namespace {

bool IsLoopback(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
  if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
  return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
}

}  // namespace

// ---- listening, running and stopping ----------------------------------------

absl::Status TcpStoreServer::Loop::Listen() {
  std::vector<SocketAddress> candidates;
  if (options_.bind_host.empty()) {
    for (const char* wildcard : {"::", "0.0.0.0"}) {
      absl::StatusOr<std::vector<SocketAddress>> resolved =
          Resolve(wildcard, options_.port, /*passive=*/true);
      if (resolved.ok()) {
        candidates.insert(candidates.end(), resolved->begin(), resolved->end());
      }
    }
  } else {
    absl::StatusOr<std::vector<SocketAddress>> resolved =
        Resolve(options_.bind_host, options_.port, /*passive=*/true);
    if (!resolved.ok()) return resolved.status();
    candidates = *std::move(resolved);
  }
  std::string failures;
  bool in_use = false;
  sockaddr_storage bound;
  socklen_t bound_length = sizeof(bound);
  for (const SocketAddress& candidate : candidates) {
    const int fd =
        socket(candidate.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int error = fd < 0 ? errno : 0;
    if (fd >= 0) {
      const int one = 1, zero = 0;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (candidate.storage.ss_family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));  // dual-stack
      }
      if (bind(fd, reinterpret_cast<const sockaddr*>(&candidate.storage), candidate.length) != 0 ||
          listen(fd, 65535) != 0 ||  // the kernel caps it at net.core.somaxconn
          getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
        error = errno;
        close(fd);
      } else {
        listen_fd_ = fd;
        break;
      }
    }
    in_use = in_use || error == EADDRINUSE;
    absl::StrAppend(&failures, failures.empty() ? "" : "; ", candidate.ToString(), ": ",
                    ErrnoText(error));
  }
  if (listen_fd_ < 0) {
    const std::string where = options_.bind_host.empty()
                                  ? FormatHostPort("*", options_.port)
                                  : FormatHostPort(options_.bind_host, options_.port);
    if (in_use) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", where,
                       ": address already in use; pick another port or stop the job that "
                       "is using it"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", where, " (", failures,
                     "); choose a bind address that belongs to this host"));
  }
  SocketAddress address{bound, bound_length};
  owner_->address_ = address.ToString();
  owner_->port_ = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (options_.token.empty() && !IsLoopback(bound)) {
    Log(absl::StrCat("the store on ", owner_->address_,
                     " listens beyond loopback without a token: anyone who can reach it can "
                     "read and change the job's keys or end its rendezvous; export the same "
                     "DIST_STORE_TOKEN to every rank (distrun does this by itself)"));
  }
  // Enough descriptors for every connection the limits allow (never lowered).
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    const rlim_t wanted = static_cast<rlim_t>(limits_.max_pending_connections) +
                          static_cast<rlim_t>(limits_.max_connections) +
                          static_cast<rlim_t>(std::max(256, limits_.fd_reserve));
    if (files.rlim_cur < wanted && files.rlim_cur < files.rlim_max) {
      files.rlim_cur = std::min(wanted, files.rlim_max);
      setrlimit(RLIMIT_NOFILE, &files);
    }
  }
  uv_loop_init(&loop_);
  loop_.data = this;
  uv_poll_init_socket(&loop_, &listener_, listen_fd_);
  uv_poll_start(&listener_, UV_READABLE, &Loop::OnListenerReady);
  uv_async_init(&loop_, &stop_async_, &Loop::OnStop);
  uv_async_init(&loop_, &adopt_async_, &Loop::OnAdopt);
  uv_timer_init(&loop_, &accept_retry_);
  uv_timer_init(&loop_, &sweep_timer_);
  const uint64_t sweep_ms = static_cast<uint64_t>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(std::min(limits_.handshake_timeout, limits_.stall_timeout)) / 4, 10,
      1000));
  uv_timer_start(&sweep_timer_, &Loop::OnSweep, sweep_ms, sweep_ms);
  return absl::OkStatus();
}

void TcpStoreServer::Loop::Run() {
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
}

void TcpStoreServer::Loop::OnStop(uv_async_t* async) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(async));
  std::vector<Client*> clients(self->clients_.begin(), self->clients_.end());
  for (Client* client : clients) self->Close(client);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->listener_),
           [](uv_handle_t* handle) { close(From(handle)->listen_fd_); });
  uv_close(reinterpret_cast<uv_handle_t*>(&self->stop_async_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->adopt_async_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->sweep_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->accept_retry_), nullptr);
  absl::MutexLock lock(&self->adopt_mu_);
  for (int fd : self->adopted_) close(fd);
  self->adopted_.clear();
}

void TcpStoreServer::Loop::OnAdopt(uv_async_t* async) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(async));
  std::vector<int> fds;
  {
    absl::MutexLock lock(&self->adopt_mu_);
    fds.swap(self->adopted_);
  }
  for (int fd : fds) self->AddClient(fd);
}

// ---- the owner ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    TcpStoreServerOptions options) {
  if (absl::Status limits = CheckLimits(options.limits); !limits.ok()) return limits;
  std::unique_ptr<TcpStoreServer> server(new TcpStoreServer());
  server->loop_ = std::make_unique<Loop>(server.get(), std::move(options));
  absl::Status listening = server->loop_->Listen();
  if (!listening.ok()) {
    server->stopped_ = true;
    return listening;
  }
  Loop* loop = server->loop_.get();
  server->thread_ = std::thread([loop] { loop->Run(); });
  return server;
}

TcpStoreServer::~TcpStoreServer() { Stop(); }

void TcpStoreServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  loop_->RequestStop();
  thread_.join();
}

void TcpStoreServer::Adopt(int fd) {
  if (stopped_) {
    close(fd);
    return;
  }
  loop_->Adopt(fd);
}

std::string TcpStoreServer::failure() const {
  absl::MutexLock lock(&mu_);
  return failure_;
}

int TcpStoreServer::clients() const {
  absl::MutexLock lock(&mu_);
  return clients_;
}

bool TcpStoreServer::WaitForClientsToLeave(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return clients_ == 0; };
  return mu_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

}  // namespace dist::store

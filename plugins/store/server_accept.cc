// TcpStoreServer::Loop: accepting connections, the descriptor budget (the
// reserve left to the host process), evicting connections to make room, the
// sweep timer (handshake deadlines, stalls) and rate-limited logging.
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "plugins/store/net.h"
#include "plugins/store/server_limits.h"
#include "plugins/store/tcp_store_server_loop.h"

namespace dist::store {

void TcpStoreServer::Loop::OnListenerReady(uv_poll_t* poll, int status, int) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(poll));
  if (status < 0) {
    self->LogLimited(absl::StrCat("accept failed: ", uv_strerror(status)));
    return;
  }
  self->AcceptAll();
}

void TcpStoreServer::Loop::OnAcceptRetry(uv_timer_t* timer) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(timer));
  if (!self->listener_paused_) return;
  self->listener_paused_ = false;
  uv_poll_start(&self->listener_, UV_READABLE, &Loop::OnListenerReady);
}

void TcpStoreServer::Loop::AcceptAll() {
  // A bounded batch per wake-up, so accepting never starves the clients.
  for (int i = 0; i < 1024; ++i) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      const int served = fd >= ReserveStart() ? AcceptIntoReserve(fd) : fd;
      if (served >= 0) AddClient(served);
      continue;
    }
    const int error = errno;
    if (error == EINTR || error == ECONNABORTED) continue;
    if (error == EAGAIN || error == EWOULDBLOCK) return;
    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
      // Out of descriptors (the host took them, or the limit was lowered):
      // make room as for a newcomer in the reserve, and accept again at once
      // (Close frees the descriptor before it returns); else leave
      // newcomers in the kernel's queue for a moment.
      if (MakeRoom(
              absl::StrCat("the process ran out of file descriptors (", ErrnoText(error), ")"))) {
        continue;
      }
      LogLimited(absl::StrCat("cannot accept a store client: ", ErrnoText(error),
                              " (raise the open files limit, ulimit -n)"));
      if (!listener_paused_) {
        listener_paused_ = true;
        uv_poll_stop(&listener_);
        uv_timer_start(&accept_retry_, &Loop::OnAcceptRetry, 100, 0);
      }
      return;
    }
    LogLimited(absl::StrCat("accept failed: ", ErrnoText(error)));
    return;
  }
}

void TcpStoreServer::Loop::AddClient(int fd) {
  if (pending_ >= limits_.max_pending_connections &&
      !EvictOldestPending(absl::StrCat("more than ", limits_.max_pending_connections,
                                       " connections are not authenticated "
                                       "(max_pending_connections)"))) {
    close(fd);
    return;
  }
  auto* client = new Client();
  client->fd = fd;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_storage peer;
  socklen_t length = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) == 0 &&
      (peer.ss_family == AF_INET || peer.ss_family == AF_INET6)) {
    client->peer = SocketAddress{peer, length}.ToString();
  } else {
    client->peer = "a local peer";
  }
  client->accepted_ms = uv_now(&loop_);
  client->id = next_id_++;
  uv_poll_init_socket(&loop_, &client->poll, fd);
  client->poll.data = client;
  clients_.insert(client);
  ++pending_;
  pending_order_.emplace_back(client, client->id);
  Update(client);
}

bool TcpStoreServer::Loop::IsIdle(const Client* client) const {
  if (client->phase != Phase::kReady || client->closing || client->close_after_write ||
      client->parked != nullptr || client->skip_remaining > 0 ||
      client->input.size() != client->input_offset || client->output_bytes > 0 ||
      !client->output.empty()) {
    return false;
  }
  int unread = 0;
  return ioctl(client->fd, FIONREAD, &unread) == 0 && unread == 0;
}

bool TcpStoreServer::Loop::EvictIdle(const std::string& why) {
  // A scan over every client, but only when the server is full (a hello at
  // max_connections, or accept out of descriptors with no stranger left to
  // drop): the busy path pays nothing but a timestamp per read and write.
  // The cheap checks first; the kernel is asked (FIONREAD) only about the
  // candidates in least-recently-active order, until one is idle.
  std::vector<std::pair<uint64_t, Client*>> candidates;
  for (Client* client : clients_) {
    if (client->phase == Phase::kReady && !client->closing && client->parked == nullptr &&
        client->output_bytes == 0 && client->input.size() == client->input_offset) {
      candidates.emplace_back(client->active_ms, client);
    }
  }
  auto later = [](const std::pair<uint64_t, Client*>& a, const std::pair<uint64_t, Client*>& b) {
    return a.first > b.first || (a.first == b.first && a.second->id > b.second->id);
  };
  std::make_heap(candidates.begin(), candidates.end(), later);
  while (!candidates.empty()) {
    std::pop_heap(candidates.begin(), candidates.end(), later);
    Client* client = candidates.back().second;
    candidates.pop_back();
    if (!IsIdle(client)) continue;
    LogLimited(absl::StrCat("evicting idle store client ", client->peer,
                            " (the least recently active, idle for ",
                            uv_now(&loop_) - client->active_ms, " ms) to make room: ", why,
                            "; its client reconnects when it needs the store again"));
    ++owner_->dropped_;
    Close(client);
    return true;
  }
  return false;
}

int64_t TcpStoreServer::Loop::ReserveStart() const {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY ||
      files.rlim_cur > static_cast<rlim_t>(INT32_MAX)) {
    return INT64_MAX;  // descriptor numbers are ints: no reserve to reach
  }
  const int64_t limit = static_cast<int64_t>(files.rlim_cur);
  return std::max<int64_t>(1, limit - FdReserve(limits_, limit));
}

int TcpStoreServer::Loop::AcceptIntoReserve(int fd) {
  const int64_t start = ReserveStart();
  const std::string why = absl::StrCat(
      "the process is at its descriptor budget (descriptors from ", start,
      " up to the open-files limit are left to the process hosting the store; fd_reserve)");
  if (!MakeRoom(why)) {
    LogLimited(absl::StrCat(
        "refusing a store client: the process is at its descriptor budget and no store "
        "connection can make room (every one has a request in flight); the store holds ",
        clients_.size(),
        " connections; raise the open-files limit (ulimit -n) or lower "
        "fd_reserve"));
    close(fd);
    return -1;
  }
  // Room was made below the reserve: move there, so the reserve stays free.
  const int lower = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (lower < 0 || lower > fd) {
    if (lower >= 0) close(lower);
    return fd;
  }
  close(fd);
  return lower;
}

bool TcpStoreServer::Loop::MakeRoom(const std::string& why) {
  const uint64_t now = uv_now(&loop_);
  const uint64_t silent_by = now > kSilentAfterMs ? now - kSilentAfterMs : 0;
  return EvictOldestPending(absl::StrCat(why, "; it was the oldest silent in its handshake"),
                            silent_by) ||
         EvictIdle(why) ||
         EvictOldestPending(absl::StrCat(why, "; it was the oldest in its handshake"));
}

bool TcpStoreServer::Loop::EvictOldestPending(const std::string& why, uint64_t accepted_by_ms) {
  while (!pending_order_.empty()) {
    const auto [oldest, id] = pending_order_.front();
    if (IsPending(oldest, id) && oldest->accepted_ms > accepted_by_ms) return false;
    pending_order_.pop_front();
    if (IsPending(oldest, id)) {
      Drop(oldest, absl::StrCat("dropped to make room: ", why));
      return true;
    }
  }
  return false;
}

void TcpStoreServer::Loop::OnSweep(uv_timer_t* timer) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(timer));
  const uint64_t now = uv_now(&self->loop_);
  const uint64_t handshake =
      static_cast<uint64_t>(absl::ToInt64Milliseconds(self->limits_.handshake_timeout));
  const uint64_t stall =
      static_cast<uint64_t>(absl::ToInt64Milliseconds(self->limits_.stall_timeout));
  // A backstop for wake-ups: clients held back while there is room again
  // are resumed before any stall clock is read.
  if (self->flight_bytes_ < self->FlightLimit() && !self->budget_paused_.empty()) {
    self->ResumeBudgetPaused();
  }
  std::vector<std::pair<Client*, std::string>> late;
  for (Client* client : self->clients_) {
    if (client->closing) continue;
    if (client->phase != Phase::kReady && now - client->accepted_ms > handshake) {
      late.emplace_back(client, absl::StrCat("no handshake within ", handshake, " ms"));
    } else if (client->output_bytes > 0 && now - client->output_since_ms > stall) {
      late.emplace_back(
          client, absl::StrCat("it did not read its replies for ", stall, " ms (stall_timeout)"));
    } else if (client->parked == nullptr && client->input_since_ms != 0 &&
               now - client->input_since_ms > stall && self->MissingFrame(client)) {
      late.emplace_back(client, absl::StrCat("a request did not arrive whole within ", stall,
                                             " ms (stall_timeout)"));
    }
  }
  for (auto& [client, why] : late) self->Drop(client, why);
  std::deque<std::pair<Client*, uint64_t>> still;
  for (const auto& [client, id] : self->pending_order_) {
    if (self->IsPending(client, id)) still.emplace_back(client, id);
  }
  self->pending_order_.swap(still);
  // Opens a new log window; says how many lines the last one held back.
  if (now - self->log_window_ms_ >= 10000) {
    if (self->log_suppressed_ > 0) {
      self->Log(absl::StrCat(self->log_suppressed_,
                             " more refused or dropped store clients in the last 10 s "
                             "were not logged"));
    }
    self->log_window_ms_ = now;
    self->log_lines_ = 0;
    self->log_suppressed_ = 0;
  }
}

void TcpStoreServer::Loop::LogLimited(const std::string& line) {
  if (log_lines_ >= limits_.max_log_lines) {
    ++log_suppressed_;
    return;
  }
  ++log_lines_;
  Log(line);
}

}  // namespace dist::store

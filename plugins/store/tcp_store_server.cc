#include "plugins/store/tcp_store_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "plugins/store/auth.h"
#include "plugins/store/kv_table.h"
#include "plugins/store/limits.h"
#include "plugins/store/net.h"

namespace dist::store {
namespace {

using protocol::Op;
using protocol::Reader;
using protocol::Writer;

struct Waiter;

enum class Phase {
  kHello,  // waiting for the client's hello
  kProof,  // challenge sent, waiting for the client's proof
  kReady,  // authenticated: requests
};

struct Client {
  uv_poll_t poll;
  int fd = -1;
  std::string peer;
  Phase phase = Phase::kHello;
  std::string client_nonce;
  std::string server_nonce;
  // Bytes received and not yet handled start at input_offset.
  std::string input;
  size_t input_offset = 0;
  // A request over max_request_bytes: this many bytes are still to be read
  // and thrown away, then the client is told (skip_length is its size).
  size_t skip_remaining = 0;
  size_t skip_length = 0;
  std::deque<std::string> output;  // replies not yet sent
  size_t output_sent = 0;          // of output.front()
  size_t output_bytes = 0;         // not yet sent
  size_t output_held = 0;          // allocated for the queued replies
  size_t parked_bytes = 0;         // keys of the parked request
  size_t held = 0;                 // what this client counts in flight_bytes_
  uint64_t id = 0;                 // tells a reused address from this client
  uint64_t accepted_ms = 0;        // loop time of accept (handshake deadline)
  uint64_t input_since_ms = 0;     // first byte of a partial request (stalls)
  uint64_t output_since_ms = 0;    // last progress writing (stalls)
  uint64_t active_ms = 0;          // last byte read or written (idle eviction)
  int events = 0;                  // what the poll watches now
  bool closing = false;
  bool close_after_write = false;
  bool budget_paused = false;
  bool big_reserved = false;  // room for its big request is set aside
  bool asked = false;         // sent a request (counted in clients())
  Waiter* parked = nullptr;   // a get/wait waiting for keys
};

struct Waiter {
  uv_timer_t timer;
  Client* client = nullptr;
  Op op = Op::kGet;
  std::vector<std::string> keys;  // deduplicated
  size_t missing = 0;
  int64_t timeout_ms = 0;
};

bool IsLoopback(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
  if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
  return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
}

std::string ErrnoText(int error) { return strerror(error); }

// What parking a request on `keys` holds: each key in the waiter and, while
// missing, in the index of waiting keys.
size_t ParkedBytes(const std::vector<std::string>& keys) {
  size_t bytes = 0;
  for (const std::string& key : keys) bytes += 2 * (key.size() + sizeof(std::string)) + 16;
  return bytes;
}

constexpr size_t kReadChunk = 64 * 1024;
// A client may have this much unsent before we stop reading its requests
// (one reply, however large, is always allowed).
constexpr size_t kMaxQueuedPerClient = 256 * 1024;
// Requests up to kSmallRequest bytes may also use kSmallReserve beyond the
// flight budget (see MayRead).
constexpr size_t kSmallRequest = 64 * 1024;
constexpr size_t kSmallReserve = 4 * 1024 * 1024;
// A client's hello or proof (a nonce or a proof, 32 bytes, and a little).
constexpr size_t kMaxClientHandshakeBytes = 256;
// A connection still in its handshake this long after it was accepted is
// silent, the first to make room for a newcomer: a rank's handshake takes
// a round trip or two.
constexpr uint64_t kSilentAfterMs = 200;

}  // namespace

class TcpStoreServer::Loop {
 public:
  Loop(TcpStoreServer* owner, TcpStoreServerOptions options)
      : owner_(owner), options_(std::move(options)), limits_(options_.limits) {}

  absl::Status Listen();
  void Run();
  void RequestStop() { uv_async_send(&stop_async_); }
  void Adopt(int fd) {
    {
      absl::MutexLock lock(&adopt_mu_);
      adopted_.push_back(fd);
    }
    uv_async_send(&adopt_async_);
  }

 private:
  static Loop* From(uv_handle_t* handle) { return static_cast<Loop*>(handle->loop->data); }
  static void OnListenerReady(uv_poll_t* poll, int status, int events);
  static void OnClientReady(uv_poll_t* poll, int status, int events);
  static void OnClientClosed(uv_handle_t* handle);
  static void OnWaiterTimeout(uv_timer_t* timer);
  static void OnStop(uv_async_t* async);
  static void OnAdopt(uv_async_t* async);
  static void OnSweep(uv_timer_t* timer);
  static void OnAcceptRetry(uv_timer_t* timer);

  // Refusals and drops go through here: at most max_log_lines per 10 s.
  void LogLimited(const std::string& line);
  void Log(const std::string& line) {
    if (options_.log) options_.log(line);
  }
  void AcceptAll();
  void AddClient(int fd);
  // The lowest descriptor number that lies in the reserve the server leaves
  // to its host process (fd_reserve below the open-files limit).
  int64_t ReserveStart() const;
  // `fd` was accepted into the host's reserve: makes room (MakeRoom) and
  // moves it below the reserve, or refuses it. The descriptor to serve, or
  // -1.
  int AcceptIntoReserve(int fd);
  // Makes room for a newcomer, which is not among the clients yet, so it is
  // never its own victim: closes the oldest connection silent in its
  // handshake past kSilentAfterMs, else the least recently active idle
  // authenticated one (EvictIdle), else the oldest still in its handshake.
  // Never one with a request in flight. False when none could go.
  bool MakeRoom(const std::string& why);
  // Makes room for a new connection: drops the oldest unauthenticated one
  // accepted at or before `accepted_by_ms` (loop time).
  bool EvictOldestPending(const std::string& why, uint64_t accepted_by_ms = UINT64_MAX);
  // Makes room for a new connection when the server is full: drops the
  // least recently active idle authenticated one (IsIdle). False when none
  // is idle.
  bool EvictIdle(const std::string& why);
  // Authenticated and doing nothing: no parked request, no partial request,
  // no unsent reply, and nothing unread in the kernel, so closing it loses
  // no request (the client's pool reconnects, and retries a request that
  // met the close before any byte of its reply).
  bool IsIdle(const Client* client) const;
  bool IsPending(Client* client, uint64_t id) const {
    return clients_.contains(client) && client->id == id && client->phase != Phase::kReady &&
           !client->closing;
  }
  void Drop(Client* client, const std::string& reason);
  void Close(Client* client);
  void Send(Client* client, std::string frame);
  void SendError(Client* client, absl::StatusCode code, const std::string& message);
  void Flush(Client* client);
  void ReadFrom(Client* client);
  bool WantsToRead(const Client* client) const;
  // The bytes of the frame `client` is receiving, header included (just the
  // header while its length is not in yet).
  static size_t FrameBytes(const Client* client);
  // Recounts what `client` holds, and the poll events it needs.
  void Update(Client* client);
  void ResumeBudgetPaused();
  void ProcessInput(Client* client);
  // False when the frame breaks the protocol (the caller drops the client).
  bool HandleHello(Client* client, absl::string_view payload, std::string* why);
  bool HandleProof(Client* client, absl::string_view payload, std::string* why);
  bool HandleRequest(Client* client, absl::string_view payload, std::string* why);
  void Park(Client* client, Op op, std::vector<std::string> keys, int64_t timeout_ms);
  void NotifyKey(const std::string& key);
  void Complete(Waiter* waiter, bool timed_out);
  // Answers a parked request with `reply` and releases its waiter.
  void Resume(Waiter* waiter, Writer reply);
  // Takes `client`'s parked request out of the accounts (parked_total_,
  // parked_by_size_) and off the client; the waiter is the caller's.
  void Unpark(Client* client);
  // Answers the largest parked request "set aside, send it again"
  // (kSetAsideCode), to make room for a newer one.
  void SetAsideLargest();
  // kFail: remembers the first reason (when failures are kept) and answers
  // every parked request with it.
  void HandleFail(Client* client, const std::string& reason);
  void Unindex(Waiter* waiter);
  void DrainResumed();
  std::string Where() const {
    return options_.advertised_host.empty()
               ? owner_->address_
               : FormatHostPort(options_.advertised_host, owner_->port_);
  }

  TcpStoreServer* owner_;
  TcpStoreServerOptions options_;
  const TcpStoreServerLimits limits_;
  uv_loop_t loop_;
  int listen_fd_ = -1;
  uv_poll_t listener_;
  bool listener_paused_ = false;
  uv_async_t stop_async_;
  uv_async_t adopt_async_;
  uv_timer_t sweep_timer_;   // handshake deadlines, stalls, log summaries
  uv_timer_t accept_retry_;  // out of descriptors: accept again later
  absl::Mutex adopt_mu_;
  std::vector<int> adopted_ ABSL_GUARDED_BY(adopt_mu_);
  KvTable table_;
  size_t stored_bytes_ = 0;
  // Requests being received and replies not yet sent (every client's
  // `held`), and parked requests' keys; each may use half of
  // max_buffered_bytes.
  size_t flight_bytes_ = 0;
  size_t parked_total_ = 0;
  size_t FlightLimit() const { return limits_.max_buffered_bytes / 2; }
  size_t ParkedLimit() const { return limits_.max_buffered_bytes / 2; }
  // Recounts what `client` holds in flight_bytes_.
  void Recount(Client* client);
  // Whether the budget lets `client` read: always in the handshake (a few
  // hundred bytes) and to finish a request whose room is reserved already.
  // Small requests (all a rendezvous sends) have a reserve of their own on
  // top, so clients holding big partial requests cannot starve them.
  bool MayRead(const Client* client) const {
    if (client->phase != Phase::kReady) return true;
    const size_t have = client->input.size() - client->input_offset;
    if (have < protocol::kFrameHeaderBytes) return flight_bytes_ < FlightLimit() + kSmallReserve;
    const uint32_t length = protocol::DecodeLength(client->input.data() + client->input_offset);
    if (length <= kSmallRequest) return flight_bytes_ < FlightLimit() + kSmallReserve;
    return client->big_reserved;  // room for all of it is set aside (Reserve)
  }
  // Sets room aside for the big request whose header `client` holds, when
  // the budget has it, or when no other big request has room (so one as
  // large as the whole budget still gets through, one at a time).
  void Reserve(Client* client, uint32_t length) {
    if (client->big_reserved) return;
    if (flight_bytes_ + length > FlightLimit() && big_reserved_ > 0) return;
    client->input.reserve(protocol::kFrameHeaderBytes + length);
    client->big_reserved = true;
    ++big_reserved_;
    Recount(client);
  }
  void Unreserve(Client* client) {
    if (!client->big_reserved) return;
    client->big_reserved = false;
    --big_reserved_;
  }
  // Whether `client` is in the middle of receiving a request (and not just
  // holding whole ones back until the budget lets them through).
  bool MissingFrame(const Client* client) const {
    if (client->skip_remaining > 0) return true;
    const size_t have = client->input.size() - client->input_offset;
    if (have == 0) return false;
    return have < protocol::kFrameHeaderBytes ||
           have < protocol::kFrameHeaderBytes +
                      protocol::DecodeLength(client->input.data() + client->input_offset);
  }
  // Whether the next complete frame of `client` may be handled now.
  bool CanProcess(const Client* client) const;
  int pending_ = 0;  // connections before authentication
  int authenticated_ = 0;
  // Unauthenticated clients, oldest first, by (address, id); entries of
  // clients authenticated or closed since are skipped and swept.
  std::deque<std::pair<Client*, uint64_t>> pending_order_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<std::string, std::vector<Waiter*>> waiting_;
  absl::flat_hash_set<Client*> clients_;
  std::vector<Client*> budget_paused_;
  bool resuming_ = false;
  bool resume_again_ = false;     // asked for while resuming
  int big_reserved_ = 0;          // clients with room set aside for a big request
  std::vector<Client*> resumed_;  // clients whose parked request finished
  // Parked requests by the bytes they hold, to find the largest.
  std::set<std::pair<size_t, Waiter*>> parked_by_size_;
  // Set once a rank reported a failed rendezvous (keep_failures only): what
  // every later hello and request is answered with.
  std::optional<std::string> failure_;
  uint64_t log_window_ms_ = 0;
  int log_lines_ = 0;
  int64_t log_suppressed_ = 0;
  char read_buffer_[kReadChunk];
};

// ---- listening and accepting ----------------------------------------------

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

// ---- reading and writing -----------------------------------------------------

bool TcpStoreServer::Loop::WantsToRead(const Client* client) const {
  if (client->closing || client->close_after_write || client->parked != nullptr) return false;
  if (client->output_held > kMaxQueuedPerClient) return false;  // reads no replies
  if (client->skip_remaining > 0) return true;
  const size_t have = client->input.size() - client->input_offset;
  const size_t frame = FrameBytes(client);
  // A big request is read into the room Reserve set aside and not a byte
  // further: more would make the buffer reallocate, at twice the size, past
  // the budget (and then hold the request back for the memory it took).
  if (client->big_reserved) return have < frame;
  // Enough for the frame in progress (or the next header) plus one chunk.
  return have < frame + kReadChunk;
}

size_t TcpStoreServer::Loop::FrameBytes(const Client* client) {
  const size_t have = client->input.size() - client->input_offset;
  if (have < protocol::kFrameHeaderBytes) return protocol::kFrameHeaderBytes;
  return protocol::kFrameHeaderBytes +
         protocol::DecodeLength(client->input.data() + client->input_offset);
}

void TcpStoreServer::Loop::Recount(Client* client) {
  // Capacity, not size: what the allocator really holds for the client.
  const size_t held = client->input.capacity() + client->output_held;
  flight_bytes_ = flight_bytes_ - client->held + held;
  client->held = held;
}

bool TcpStoreServer::Loop::CanProcess(const Client* client) const {
  if (client->closing || client->close_after_write || client->parked != nullptr ||
      client->skip_remaining > 0) {
    return false;
  }
  // Handshake replies are small; requests wait while replies pile up, here
  // or in all.
  if (client->phase != Phase::kReady) return true;
  if (client->output_held > kMaxQueuedPerClient) return false;
  // A big request's room is counted already, and handling it frees it: held
  // back for the budget it fills itself, it would wait forever.
  if (client->big_reserved) return true;
  const size_t have = client->input.size() - client->input_offset;
  const bool small =
      have >= protocol::kFrameHeaderBytes &&
      protocol::DecodeLength(client->input.data() + client->input_offset) <= kSmallRequest;
  return flight_bytes_ < FlightLimit() + (small ? kSmallReserve : 0);
}

void TcpStoreServer::Loop::Update(Client* client) {
  if (client->closing) return;
  Recount(client);
  int events = 0;
  // A client still in the handshake reads a few hundred bytes at most and
  // is never held back, so the job's own ranks always get to authenticate.
  const bool over = !MayRead(client);
  const bool complete_frame_waits = [&] {
    const size_t have = client->input.size() - client->input_offset;
    return have >= protocol::kFrameHeaderBytes &&
           have >= protocol::kFrameHeaderBytes +
                       protocol::DecodeLength(client->input.data() + client->input_offset);
  }();
  if (WantsToRead(client) && !over) events |= UV_READABLE;
  // Held back by us, not slow: the stall clock of its request waits.
  if (over && client->input_since_ms != 0) client->input_since_ms = uv_now(&loop_);
  // Held back by the budget alone: to be read, or its frames handled, when
  // it drains (ResumeBudgetPaused), and only then.
  const bool frames_held_back = complete_frame_waits && client->phase == Phase::kReady &&
                                flight_bytes_ >= FlightLimit() && !client->close_after_write &&
                                client->skip_remaining == 0 && client->parked == nullptr &&
                                client->output_held <= kMaxQueuedPerClient && !CanProcess(client);
  if (((WantsToRead(client) && over) || frames_held_back) && !client->budget_paused) {
    client->budget_paused = true;
    budget_paused_.push_back(client);
  }
  if (client->output_bytes > 0) events |= UV_WRITABLE;
  // A client that is not read (parked, or held back) still gets its hang-up
  // noticed, so a rank killed in a wait frees its connection at once.
  events |= UV_DISCONNECT;
  if (events != client->events) {
    client->events = events;
    if (events == 0) {
      uv_poll_stop(&client->poll);
    } else {
      uv_poll_start(&client->poll, events, &Loop::OnClientReady);
    }
  }
  if (flight_bytes_ < FlightLimit() && !budget_paused_.empty()) ResumeBudgetPaused();
}

void TcpStoreServer::Loop::ResumeBudgetPaused() {
  if (resuming_) {  // Update below came back here
    resume_again_ = true;
    return;
  }
  resuming_ = true;
  // Clients met early in a pass may be paused again before a later one
  // frees room (its big request handled, say): another pass then, for as
  // long as passes free room, since nothing else may wake them.
  while (true) {
    resume_again_ = false;
    const size_t before = flight_bytes_;
    std::vector<Client*> paused;
    paused.swap(budget_paused_);
    for (Client* client : paused) {
      client->budget_paused = false;
      if (client->closing) continue;  // still allocated: deletion waits for uv_close
      // Frames it already holds first, then reading again.
      ProcessInput(client);
      if (!client->closing) Update(client);
    }
    if (!resume_again_ || flight_bytes_ >= before || flight_bytes_ >= FlightLimit() ||
        budget_paused_.empty()) {
      break;
    }
  }
  resuming_ = false;
  DrainResumed();
}

void TcpStoreServer::Loop::OnClientReady(uv_poll_t* poll, int status, int events) {
  auto* client = static_cast<Client*>(poll->data);
  Loop* self = From(reinterpret_cast<uv_handle_t*>(poll));
  if (client->closing) return;
  if (status < 0) {
    self->Close(client);  // reset by the peer
    return;
  }
  if ((events & UV_DISCONNECT) && !(events & UV_READABLE)) {
    self->Close(client);  // gone while we were not reading from it
    self->DrainResumed();
    return;
  }
  if (events & UV_WRITABLE) {
    self->Flush(client);
    // Requests held back while its replies piled up.
    if (!client->closing) self->ProcessInput(client);
  }
  // Checked per client, so one batch of wake-ups overshoots by a chunk at most.
  if (!client->closing && (events & UV_READABLE) && self->MayRead(client)) {
    self->ReadFrom(client);
  }
  if (!client->closing) self->Update(client);
  self->DrainResumed();
}

void TcpStoreServer::Loop::ReadFrom(Client* client) {
  // One chunk per wake-up keeps the loop fair between clients.
  size_t want = kReadChunk;
  if (client->skip_remaining > 0) want = std::min(want, client->skip_remaining);
  if (client->phase != Phase::kReady) {
    // A handshake frame is small: never read (or hold) more than one.
    const size_t have = client->input.size() - client->input_offset;
    const size_t limit = protocol::kFrameHeaderBytes + kMaxClientHandshakeBytes;
    if (have >= limit) return;
    want = std::min(want, limit - have);
  }
  if (client->big_reserved) {  // up to the end of the room set aside (WantsToRead)
    const size_t have = client->input.size() - client->input_offset;
    const size_t frame = FrameBytes(client);
    if (have >= frame) return;
    want = std::min(want, frame - have);
  }
  const ssize_t n = recv(client->fd, read_buffer_, want, 0);
  if (n == 0) {
    Close(client);  // the client left
    return;
  }
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) Close(client);
    return;
  }
  client->active_ms = uv_now(&loop_);
  size_t used = 0;
  if (client->skip_remaining > 0) {
    used = std::min(client->skip_remaining, static_cast<size_t>(n));
    client->skip_remaining -= used;
    if (client->skip_remaining == 0) {
      client->input_since_ms = 0;
      SendError(
          client, absl::StatusCode::kResourceExhausted,
          absl::StrCat("the store server at ", Where(), " refused a request of ",
                       client->skip_length, " bytes: its limit is ", limits_.max_request_bytes,
                       " bytes (max_request_bytes); keep large data out of the store"));
      ++owner_->served_;
    }
  }
  if (used < static_cast<size_t>(n)) {
    if (client->input.size() == client->input_offset && client->input_since_ms == 0) {
      client->input_since_ms = uv_now(&loop_);
    }
    client->input.append(read_buffer_ + used, static_cast<size_t>(n) - used);
  }
  ProcessInput(client);
}

void TcpStoreServer::Loop::Send(Client* client, std::string frame) {
  if (client->closing) return;
  if (client->output_bytes == 0) client->output_since_ms = uv_now(&loop_);
  client->output_bytes += frame.size();
  client->output_held += frame.size();
  client->output.push_back(std::move(frame));
  Flush(client);
}

void TcpStoreServer::Loop::Flush(Client* client) {
  while (!client->output.empty()) {
    const std::string& front = client->output.front();
    // MSG_NOSIGNAL: a client that vanished is an EPIPE here, never a
    // SIGPIPE in the process that hosts the server.
    const ssize_t n = send(client->fd, front.data() + client->output_sent,
                           front.size() - client->output_sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Close(client);
      return;
    }
    client->output_sent += static_cast<size_t>(n);
    client->output_bytes -= static_cast<size_t>(n);
    client->output_since_ms = uv_now(&loop_);
    client->active_ms = client->output_since_ms;
    if (client->output_sent == front.size()) {
      client->output_held -= front.size();
      client->output.pop_front();
      client->output_sent = 0;
    }
  }
  if (client->close_after_write) Close(client);
}

void TcpStoreServer::Loop::SendError(Client* client, absl::StatusCode code,
                                     const std::string& message) {
  Writer reply;
  reply.U8(static_cast<uint8_t>(code));
  reply.Str(message);
  Send(client, std::move(reply).Finish());
}

void TcpStoreServer::Loop::Drop(Client* client, const std::string& reason) {
  LogLimited(absl::StrCat("dropping store client ", client->peer, ": ", reason));
  ++owner_->dropped_;
  Close(client);
}

void TcpStoreServer::Loop::Close(Client* client) {
  if (client->closing) return;
  client->closing = true;
  if (Waiter* waiter = client->parked) {
    Unpark(client);
    Unindex(waiter);
    uv_timer_stop(&waiter->timer);
    uv_close(reinterpret_cast<uv_handle_t*>(&waiter->timer),
             [](uv_handle_t* handle) { delete static_cast<Waiter*>(handle->data); });
  }
  flight_bytes_ -= client->held;
  client->held = 0;
  Unreserve(client);
  if (client->budget_paused) {
    budget_paused_.erase(std::remove(budget_paused_.begin(), budget_paused_.end(), client),
                         budget_paused_.end());
    client->budget_paused = false;
  }
  if (client->phase == Phase::kReady) {
    --authenticated_;
  } else {
    --pending_;
  }
  if (client->asked) {
    absl::MutexLock lock(&owner_->mu_);
    --owner_->clients_;
  }
  clients_.erase(client);
  uv_poll_stop(&client->poll);
  // Stopped, the poll no longer watches the descriptor (libuv removes it
  // from epoll at once), so it is closed now, not when the handle is: a
  // connection evicted to make room frees its descriptor for the newcomer
  // in the same turn.
  close(client->fd);
  client->fd = -1;
  uv_close(reinterpret_cast<uv_handle_t*>(&client->poll), &Loop::OnClientClosed);
  if (flight_bytes_ < FlightLimit() && !budget_paused_.empty()) ResumeBudgetPaused();
}

void TcpStoreServer::Loop::OnClientClosed(uv_handle_t* handle) {
  auto* client = static_cast<Client*>(handle->data);
  // Still listed as budget-paused or resumed? Those lists are drained in
  // the same loop turn as the close, before this callback runs.
  delete client;
}

void TcpStoreServer::Loop::ProcessInput(Client* client) {
  while (true) {
    Recount(client);
    if (!CanProcess(client)) break;
    const size_t available = client->input.size() - client->input_offset;
    if (available < protocol::kFrameHeaderBytes) break;
    const char* start = client->input.data() + client->input_offset;
    const uint32_t length = protocol::DecodeLength(start);
    if (client->phase != Phase::kReady && length > kMaxClientHandshakeBytes) {
      Drop(client, absl::StrCat("handshake frame of ", length, " bytes exceeds the limit of ",
                                kMaxClientHandshakeBytes, " bytes"));
      return;
    }
    if (length > protocol::kMaxFrameBytes) {
      Drop(client, absl::StrCat("frame of ", length, " bytes exceeds the protocol's limit of ",
                                protocol::kMaxFrameBytes, " bytes"));
      return;
    }
    if (length > limits_.max_request_bytes) {
      // Valid but over this server's limit: thrown away as it arrives,
      // never buffered, and the client is told why.
      const size_t here = std::min<size_t>(available - protocol::kFrameHeaderBytes, length);
      client->input_offset += protocol::kFrameHeaderBytes + here;
      client->skip_length = length;
      client->skip_remaining = length - here;
      client->input_since_ms = uv_now(&loop_);
      if (client->skip_remaining == 0) {
        SendError(client, absl::StatusCode::kResourceExhausted,
                  absl::StrCat("the store server at ", Where(), " refused a request of ", length,
                               " bytes: its limit is ", limits_.max_request_bytes,
                               " bytes (max_request_bytes); keep large data out of the store"));
        ++owner_->served_;
      }
      continue;
    }
    if (available < protocol::kFrameHeaderBytes + length) break;
    const absl::string_view payload(start + protocol::kFrameHeaderBytes, length);
    client->input_offset += protocol::kFrameHeaderBytes + length;
    Unreserve(client);
    std::string why;
    bool ok = false;
    switch (client->phase) {
      case Phase::kHello:
        ok = HandleHello(client, payload, &why);
        break;
      case Phase::kProof:
        ok = HandleProof(client, payload, &why);
        break;
      case Phase::kReady:
        ok = HandleRequest(client, payload, &why);
        break;
    }
    if (!ok) {
      Drop(client, why);
      return;
    }
  }
  if (client->closing) return;
  // Compact: what is left is one partial frame at most. An emptied buffer
  // is freed, so idle connections hold no buffer at all.
  if (client->input_offset > 0) {
    client->input.erase(0, client->input_offset);
    client->input_offset = 0;
    if (client->input.empty()) {
      std::string().swap(client->input);
    } else {
      if (client->input.capacity() > 2 * client->input.size() + kReadChunk) {
        client->input.shrink_to_fit();
      }
      client->input_since_ms = uv_now(&loop_);  // a new partial request starts
    }
  }
  // Room for the whole request once its header is in, counted from now:
  // reading the rest then costs nothing more (MayRead), so a request that
  // started is never stalled by the budget, and no doubling overshoots.
  // Not while a request of the client is parked: it reads nothing until
  // the wait ends (DrainResumed brings it here again), and room set aside
  // meanwhile would keep other big requests out for as long as the wait.
  if (client->phase == Phase::kReady && client->skip_remaining == 0 && client->parked == nullptr &&
      client->input.size() >= protocol::kFrameHeaderBytes) {
    const uint32_t length = protocol::DecodeLength(client->input.data());
    // Only within the budget: otherwise MayRead holds the client back
    // until ResumeBudgetPaused brings it here again.
    if (length > kSmallRequest && length <= limits_.max_request_bytes) Reserve(client, length);
  }
  if (client->input.empty() && client->skip_remaining == 0) client->input_since_ms = 0;
}

// ---- the handshake -----------------------------------------------------------

bool TcpStoreServer::Loop::HandleHello(Client* client, absl::string_view payload,
                                       std::string* why) {
  Reader reader(payload);
  uint32_t magic = 0;
  uint16_t version = 0;
  if (!reader.U32(&magic) || magic != protocol::kMagic) {
    *why = "not a dist store client (bad magic in the first frame)";
    return false;
  }
  if (!reader.U16(&version)) {
    *why = "malformed hello frame";
    return false;
  }
  Writer reply;
  reply.U32(protocol::kMagic);
  reply.U16(protocol::kVersion);
  auto refuse = [&](absl::StatusCode code, const std::string& message, const std::string& log) {
    reply.U8(static_cast<uint8_t>(code));
    reply.Str(message);
    LogLimited(absl::StrCat("refusing client ", client->peer, ": ", log));
    ++owner_->dropped_;
    client->close_after_write = true;
    Send(client, std::move(reply).Finish());
    return true;
  };
  if (version != protocol::kVersion) {
    // Versions 1 and 2 sent the token here; it is not looked at.
    return refuse(absl::StatusCode::kFailedPrecondition,
                  absl::StrCat("the store server at ", owner_->address_,
                               " speaks protocol version ", protocol::kVersion,
                               " (challenge-response, the token never sent) but this "
                               "client speaks version ",
                               version, "; run the same dist release on every rank"),
                  absl::StrCat("protocol version ", version));
  }
  if (!reader.Str(auth::kNonceBytes, &client->client_nonce) ||
      client->client_nonce.size() != auth::kNonceBytes || !reader.done()) {
    *why = "malformed hello frame";
    return false;
  }
  // Room for one more is made (or refused) at the proof, after the token
  // is proven: a stranger's hello alone never evicts a rank's connection,
  // and the count cannot overshoot the limit while handshakes overlap.
  client->server_nonce = auth::Nonce();
  if (client->server_nonce.empty()) {
    return refuse(
        absl::StatusCode::kInternal,
        absl::StrCat("the store server at ", owner_->address_, " could not draw a random nonce"),
        "no random nonce");
  }
  const bool token = !options_.token.empty();
  reply.U8(0);
  reply.Str("");
  reply.Str(client->server_nonce);
  reply.U8(token ? 1 : 0);
  reply.Str(token ? auth::Proof(options_.token, auth::Role::kServer, client->client_nonce,
                                client->server_nonce)
                  : std::string());
  client->phase = Phase::kProof;
  Send(client, std::move(reply).Finish());
  return true;
}

bool TcpStoreServer::Loop::HandleProof(Client* client, absl::string_view payload,
                                       std::string* why) {
  Reader reader(payload);
  std::string proof;
  if (!reader.Str(auth::kProofBytes, &proof) || !reader.done()) {
    *why = "malformed proof frame";
    return false;
  }
  Writer reply;
  if (!options_.token.empty() &&
      !auth::ProofMatches(options_.token, auth::Role::kClient, client->client_nonce,
                          client->server_nonce, proof)) {
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kUnauthenticated));
    reply.Str(
        absl::StrCat("the store server at ", owner_->address_,
                     proof.empty() ? " requires a token and none was given" : " refused the token",
                     "; set the same DIST_STORE_TOKEN (or the store_token option) on every "
                     "rank and on the server"));
    LogLimited(absl::StrCat("refusing client ", client->peer, ": ",
                            proof.empty() ? "no token" : "wrong token"));
    ++owner_->dropped_;
    client->close_after_write = true;
  } else if (failure_.has_value()) {
    // A late rank: the rendezvous it wants to join is over. Checked after
    // the token, so only the job's own ranks hear the reason.
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition));
    reply.Str(*failure_);
    ++owner_->dropped_;
    client->close_after_write = true;
  } else if (authenticated_ >= limits_.max_connections &&
             !EvictIdle(absl::StrCat(authenticated_,
                                     " connections are authenticated, the limit "
                                     "(max_connections)"))) {
    // Full of busy connections: the client retries until its timeout.
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kResourceExhausted));
    reply.Str(absl::StrCat("the store server at ", owner_->address_, " already serves ",
                           authenticated_, " connections, its limit (max_connections)"));
    LogLimited(absl::StrCat("refusing client ", client->peer, ": too many connections"));
    ++owner_->dropped_;
    client->close_after_write = true;
  } else {
    reply.U8(0);
    reply.Str("");
    client->phase = Phase::kReady;
    client->active_ms = uv_now(&loop_);
    client->client_nonce.clear();
    client->server_nonce.clear();
    --pending_;
    ++authenticated_;
  }
  Send(client, std::move(reply).Finish());
  return true;
}

// ---- requests ----------------------------------------------------------------

bool TcpStoreServer::Loop::HandleRequest(Client* client, absl::string_view payload,
                                         std::string* why) {
  Reader reader(payload);
  uint8_t raw_op = 0;
  if (!reader.U8(&raw_op)) {
    *why = "empty request frame";
    return false;
  }
  const Op op = static_cast<Op>(raw_op);
  if (!client->asked) {  // counted in clients() from its first request on
    client->asked = true;
    absl::MutexLock lock(&owner_->mu_);
    ++owner_->clients_;
  }
  if (failure_.has_value() && op != Op::kFail) {
    // The rendezvous is over: no request may start or finish a join now.
    SendError(client, absl::StatusCode::kFailedPrecondition, *failure_);
    ++owner_->served_;
    return true;
  }
  std::string key;
  // Every request but these starts with one key.
  if (op != Op::kCheck && op != Op::kWait && op != Op::kNumKeys && op != Op::kFail) {
    if (!reader.Str(kMaxKeyBytes, &key) || key.empty()) {
      *why = "request with a missing, empty or oversized key";
      return false;
    }
  }
  bool too_many_keys = false;
  auto read_keys = [&](std::vector<std::string>* keys) {
    uint32_t count = 0;
    if (!reader.U32(&count) || count > reader.remaining() / 4) return false;
    if (count > limits_.max_keys_per_request) {
      too_many_keys = true;
      return false;
    }
    keys->resize(count);
    for (std::string& k : *keys) {
      if (!reader.Str(kMaxKeyBytes, &k) || k.empty()) return false;
    }
    return true;
  };
  auto answer_too_many = [&] {
    SendError(client, absl::StatusCode::kResourceExhausted,
              absl::StrCat("the store server at ", Where(), " takes at most ",
                           limits_.max_keys_per_request,
                           " keys per check/wait (max_keys_per_request); split the keys"));
    ++owner_->served_;
    return true;
  };
  // What a set of `value_size` bytes on `key` would leave stored.
  auto fits = [&](size_t value_size) {
    const std::string* old = table_.Find(key);
    const size_t before = old == nullptr ? 0 : key.size() + old->size();
    return stored_bytes_ - before + key.size() + value_size <= limits_.max_store_bytes;
  };
  auto store_full = [&] {
    SendError(client, absl::StatusCode::kResourceExhausted,
              absl::StrCat("the store server at ", Where(), " holds ", stored_bytes_,
                           " bytes of keys and values, its limit (max_store_bytes); remove "
                           "keys that are no longer needed"));
    ++owner_->served_;
    return true;
  };
  auto account_set = [&](const std::string* old, size_t value_size) {
    if (old != nullptr) stored_bytes_ -= key.size() + old->size();
    stored_bytes_ += key.size() + value_size;
  };
  Writer reply;
  switch (op) {
    case Op::kSet: {
      std::string value;
      if (!reader.Str(kMaxValueBytes, &value) || !reader.done()) break;
      if (!fits(value.size())) return store_full();
      account_set(table_.Find(key), value.size());
      table_.Set(key, std::move(value));
      NotifyKey(key);
      reply.U8(0);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kGet: {
      int64_t timeout_ms = 0;
      if (!reader.I64(&timeout_ms) || !reader.done()) break;
      if (const std::string* value = table_.Find(key)) {
        reply.U8(0);
        reply.Str(*value);
        Send(client, std::move(reply).Finish());
        ++owner_->served_;
      } else {
        Park(client, Op::kGet, {key}, timeout_ms);
      }
      return true;
    }
    case Op::kAdd: {
      int64_t delta = 0;
      if (!reader.I64(&delta) || !reader.done()) break;
      if (!fits(20)) return store_full();  // the longest int64 in decimal
      const std::string* old = table_.Find(key);
      const size_t old_size = old == nullptr ? 0 : old->size();
      const bool existed = old != nullptr;
      absl::StatusOr<int64_t> result = table_.Add(key, delta);
      if (!result.ok()) {
        SendError(client, result.status().code(), std::string(result.status().message()));
      } else {
        if (existed) stored_bytes_ -= key.size() + old_size;
        stored_bytes_ += key.size() + table_.Find(key)->size();
        NotifyKey(key);
        reply.U8(0);
        reply.I64(*result);
        Send(client, std::move(reply).Finish());
      }
      ++owner_->served_;
      return true;
    }
    case Op::kCompareSet: {
      uint8_t has_expected = 0;
      std::string expected, desired;
      if (!reader.U8(&has_expected) || has_expected > 1 || !reader.Str(kMaxValueBytes, &expected) ||
          !reader.Str(kMaxValueBytes, &desired) || !reader.done()) {
        break;
      }
      if (!fits(desired.size())) return store_full();
      const std::string* old = table_.Find(key);
      const size_t old_size = old == nullptr ? 0 : old->size();
      const bool existed = old != nullptr;
      bool swapped = false;
      std::optional<std::string> wanted;
      if (has_expected) wanted = std::move(expected);
      std::string actual = table_.CompareSet(key, wanted, desired, &swapped);
      if (swapped) {
        if (existed) stored_bytes_ -= key.size() + old_size;
        stored_bytes_ += key.size() + desired.size();
        NotifyKey(key);
      }
      reply.U8(0);
      reply.Str(actual);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kRemove: {
      if (!reader.done()) break;
      if (const std::string* old = table_.Find(key)) stored_bytes_ -= key.size() + old->size();
      const bool existed = table_.Remove(key);
      reply.U8(0);
      reply.U8(existed ? 1 : 0);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kCheck: {
      std::vector<std::string> keys;
      if (!read_keys(&keys)) {
        if (too_many_keys) return answer_too_many();
        break;
      }
      if (!reader.done()) break;
      reply.U8(0);
      reply.U8(table_.Missing(keys).empty() ? 1 : 0);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kWait: {
      std::vector<std::string> keys;
      int64_t timeout_ms = 0;
      if (!read_keys(&keys)) {
        if (too_many_keys) return answer_too_many();
        break;
      }
      if (!reader.I64(&timeout_ms) || !reader.done()) break;
      if (table_.Missing(keys).empty()) {
        reply.U8(0);
        Send(client, std::move(reply).Finish());
        ++owner_->served_;
      } else {
        Park(client, Op::kWait, std::move(keys), timeout_ms);
      }
      return true;
    }
    case Op::kNumKeys: {
      if (!reader.done()) break;
      reply.U8(0);
      reply.I64(table_.size());
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kFail: {
      std::string reason;
      if (!reader.Str(protocol::kMaxReasonBytes, &reason) || !reader.done()) break;
      HandleFail(client, reason);
      reply.U8(0);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    default:
      *why = absl::StrCat("unknown request opcode ", raw_op);
      return false;
  }
  *why = absl::StrCat("malformed request (opcode ", raw_op, ")");
  return false;
}

void TcpStoreServer::Loop::HandleFail(Client* client, const std::string& reason) {
  const std::string line = protocol::OneLineReason(reason.empty() ? "(no reason given)" : reason);
  if (!options_.keep_failures) {
    LogLimited(absl::StrCat("client ", client->peer, " reports that its rendezvous failed: ", line,
                            " (still serving: this server outlives jobs)"));
    return;
  }
  if (failure_.has_value()) return;  // the first reason stands
  failure_ =
      absl::StrCat("tcp://", Where(), ": the rendezvous on this store already failed: ", line,
                   "; start all ranks again");
  // Not logged: every rank, rank 0 included, gets the reason as its error.
  {
    absl::MutexLock lock(&owner_->mu_);
    owner_->failure_ = *failure_;
  }
  // Ranks parked in the join's wait hear it now, not at their timeout.
  std::vector<Waiter*> parked;
  for (Client* other : clients_) {
    if (other->parked != nullptr && !other->closing) parked.push_back(other->parked);
  }
  for (Waiter* waiter : parked) {
    Unindex(waiter);
    Writer error;
    error.U8(static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition));
    error.Str(*failure_);
    Resume(waiter, std::move(error));
  }
}

// ---- parked gets and waits ---------------------------------------------------

void TcpStoreServer::Loop::Park(Client* client, Op op, std::vector<std::string> keys,
                                int64_t timeout_ms) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  const size_t bytes = ParkedBytes(keys);
  if (bytes > ParkedLimit()) {
    SendError(client, absl::StatusCode::kResourceExhausted,
              absl::StrCat("the store server at ", Where(), " can hold ", ParkedLimit(),
                           " bytes of waiting requests (half its max_buffered_bytes of ",
                           limits_.max_buffered_bytes, ") and this one needs ", bytes,
                           "; wait on fewer keys at a time"));
    ++owner_->served_;
    return;
  }
  // Full: the largest parked requests make room, however long they have
  // waited. Their clients send them again (TcpStoreClient does so unseen),
  // so nobody's wait fails for it, and a stranger who fills the room with
  // waits that never end cannot keep a job's small ones out: to hold room
  // against them, its waits would have to be smaller than theirs, and at
  // most max_connections of those never fill the room.
  while (parked_total_ + bytes > ParkedLimit() && !parked_by_size_.empty()) SetAsideLargest();
  auto* waiter = new Waiter();
  waiter->client = client;
  waiter->op = op;
  waiter->timeout_ms = std::max<int64_t>(timeout_ms, 0);
  waiter->keys = std::move(keys);
  client->parked_bytes = bytes;
  parked_total_ += bytes;
  parked_by_size_.insert({bytes, waiter});
  for (const std::string& key : table_.Missing(waiter->keys)) {
    waiting_[key].push_back(waiter);
    ++waiter->missing;
  }
  client->parked = waiter;
  uv_timer_init(&loop_, &waiter->timer);
  waiter->timer.data = waiter;
  uv_timer_start(&waiter->timer, &Loop::OnWaiterTimeout, static_cast<uint64_t>(waiter->timeout_ms),
                 0);
}

void TcpStoreServer::Loop::SetAsideLargest() {
  Waiter* waiter = std::prev(parked_by_size_.end())->second;
  LogLimited(absl::StrCat("setting aside a waiting request on ", waiter->keys.size(),
                          waiter->keys.size() == 1 ? " key (" : " keys (",
                          waiter->client->parked_bytes, " bytes) from store client ",
                          waiter->client->peer, " to make room for a newer one"));
  Unindex(waiter);
  Writer reply;
  reply.U8(protocol::kSetAsideCode);
  reply.Str(absl::StrCat("the store server at ", Where(), " set this waiting request aside ",
                         "to make room for a newer one (its waiting requests may hold ",
                         ParkedLimit(), " bytes, half its max_buffered_bytes); send it again"));
  Resume(waiter, std::move(reply));
}

void TcpStoreServer::Loop::NotifyKey(const std::string& key) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  std::vector<Waiter*> waiters = std::move(it->second);
  waiting_.erase(it);
  for (Waiter* waiter : waiters) {
    if (--waiter->missing == 0) Complete(waiter, /*timed_out=*/false);
  }
}

void TcpStoreServer::Loop::Unindex(Waiter* waiter) {
  for (const std::string& key : waiter->keys) {
    auto it = waiting_.find(key);
    if (it == waiting_.end()) continue;
    std::vector<Waiter*>& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), waiter), list.end());
    if (list.empty()) waiting_.erase(it);
  }
}

void TcpStoreServer::Loop::Complete(Waiter* waiter, bool timed_out) {
  Writer reply;
  if (timed_out) {
    Unindex(waiter);
    const std::vector<std::string> missing = table_.Missing(waiter->keys);
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kDeadlineExceeded));
    reply.Str(absl::StrCat("timed out after ", waiter->timeout_ms, " ms waiting for store key",
                           missing.size() == 1 ? " " : "s ", DescribeKeys(missing),
                           " (not set by any rank yet)"));
  } else {
    reply.U8(0);
    if (waiter->op == Op::kGet) {
      const std::string* value = table_.Find(waiter->keys[0]);
      reply.Str(value == nullptr ? std::string() : *value);
    }
  }
  Resume(waiter, std::move(reply));
}

void TcpStoreServer::Loop::Unpark(Client* client) {
  parked_by_size_.erase({client->parked_bytes, client->parked});
  parked_total_ -= client->parked_bytes;
  client->parked_bytes = 0;
  client->parked = nullptr;
}

void TcpStoreServer::Loop::Resume(Waiter* waiter, Writer reply) {
  Client* client = waiter->client;
  Unpark(client);
  Send(client, std::move(reply).Finish());
  ++owner_->served_;
  resumed_.push_back(client);
  uv_timer_stop(&waiter->timer);
  uv_close(reinterpret_cast<uv_handle_t*>(&waiter->timer),
           [](uv_handle_t* handle) { delete static_cast<Waiter*>(handle->data); });
}

void TcpStoreServer::Loop::OnWaiterTimeout(uv_timer_t* timer) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(timer));
  self->Complete(static_cast<Waiter*>(timer->data), /*timed_out=*/true);
  self->DrainResumed();
}

void TcpStoreServer::Loop::DrainResumed() {
  while (!resumed_.empty()) {
    Client* client = resumed_.back();
    resumed_.pop_back();
    // Closed clients are still allocated here: deletion waits for uv_close.
    if (client->closing) continue;
    if (client->parked == nullptr) ProcessInput(client);
    if (!client->closing) Update(client);
  }
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

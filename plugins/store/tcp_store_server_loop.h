// TcpStoreServer's event loop (TcpStoreServer::Loop): the state it keeps
// per client and per parked request, its internal limits, and the class.
// Private to plugins/store (listed in the tcp_store target's srcs): only the
// files that implement the loop include it. They are:
//   tcp_store_server.cc    the owner (Start, Stop, Adopt, clients()) and the
//                          loop's life: Listen, Run, stopping, adopting
//   server_accept.cc       accepting, the descriptor budget, evictions, the
//                          sweep timer and limited logging
//   server_io.cc           reading and writing, the flight budget, closing
//   server_handshake.cc    the hello and the proof (challenge-response)
//   server_requests.cc     framing the input and serving requests
//   server_parking.cc      gets and waits parked until their keys are set
#ifndef DIST_PLUGINS_STORE_TCP_STORE_SERVER_LOOP_H_
#define DIST_PLUGINS_STORE_TCP_STORE_SERVER_LOOP_H_

#include <string.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "plugins/store/kv_table.h"
#include "plugins/store/net.h"
#include "plugins/store/protocol.h"
#include "plugins/store/server_limits.h"
#include "plugins/store/tcp_store_server.h"

namespace dist::store {

// The loop's code names these, and the server_internal names below,
// unqualified, as it did when they were all local to one file. Only the
// loop's own files include this header.
using protocol::Op;
using protocol::Reader;
using protocol::Writer;

namespace server_internal {

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

inline std::string ErrnoText(int error) { return strerror(error); }

inline constexpr size_t kReadChunk = 64 * 1024;
// A client may have this much unsent before we stop reading its requests
// (one reply, however large, is always allowed).
inline constexpr size_t kMaxQueuedPerClient = 256 * 1024;
// Requests up to kSmallRequest bytes may also use kSmallReserve beyond the
// flight budget (see MayRead).
inline constexpr size_t kSmallRequest = 64 * 1024;
inline constexpr size_t kSmallReserve = 4 * 1024 * 1024;
// A client's hello or proof (a nonce or a proof, 32 bytes, and a little).
inline constexpr size_t kMaxClientHandshakeBytes = 256;
// A connection still in its handshake this long after it was accepted is
// silent, the first to make room for a newcomer: a rank's handshake takes
// a round trip or two.
inline constexpr uint64_t kSilentAfterMs = 200;

}  // namespace server_internal

using server_internal::Client;
using server_internal::ErrnoText;
using server_internal::kMaxClientHandshakeBytes;
using server_internal::kMaxQueuedPerClient;
using server_internal::kReadChunk;
using server_internal::kSilentAfterMs;
using server_internal::kSmallRequest;
using server_internal::kSmallReserve;
using server_internal::Phase;
using server_internal::Waiter;

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

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_TCP_STORE_SERVER_LOOP_H_

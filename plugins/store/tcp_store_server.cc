#include "plugins/store/tcp_store_server.h"

#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <optional>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "plugins/store/kv_table.h"
#include "plugins/store/limits.h"
#include "plugins/store/net.h"
#include "plugins/store/protocol.h"

namespace dist::store {
namespace {

using protocol::Op;
using protocol::Reader;
using protocol::Writer;

struct Waiter;

struct Client {
  uv_tcp_t handle;
  std::string peer;
  std::string input;  // bytes received and not yet handled
  uint64_t accepted_ms = 0;  // loop time of accept, for the hello deadline
  bool authenticated = false;
  bool closing = false;
  bool close_after_write = false;
  Waiter* parked = nullptr;  // a get/wait waiting for keys
};

struct Waiter {
  uv_timer_t timer;
  Client* client = nullptr;
  Op op = Op::kGet;
  std::vector<std::string> keys;  // deduplicated
  size_t missing = 0;
  int64_t timeout_ms = 0;
};

struct WriteRequest {
  uv_write_t request;
  std::string data;
  Client* client;
};

bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;  // no early exit: timing does not leak the prefix
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

std::string UvError(int code) { return uv_strerror(code); }

}  // namespace

class TcpStoreServer::Loop {
 public:
  Loop(TcpStoreServer* owner, TcpStoreServerOptions options)
      : owner_(owner), options_(std::move(options)) {}

  absl::Status Listen();
  void Run();
  void RequestStop() { uv_async_send(&stop_async_); }

 private:
  static Loop* From(uv_handle_t* handle) {
    return static_cast<Loop*>(handle->loop->data);
  }
  static void OnConnection(uv_stream_t* server, int status);
  static void OnAlloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void OnWrite(uv_write_t* request, int status);
  static void OnClientClosed(uv_handle_t* handle);
  static void OnWaiterTimeout(uv_timer_t* timer);
  static void OnStop(uv_async_t* async);
  static void OnSweep(uv_timer_t* timer);

  void Log(const std::string& line) {
    if (options_.log) options_.log(line);
  }
  void Drop(Client* client, const std::string& reason);
  void Close(Client* client);
  void Send(Client* client, std::string frame);
  void SendError(Client* client, absl::StatusCode code, const std::string& message);
  void ProcessInput(Client* client);
  // False when the frame breaks the protocol (the caller drops the client).
  bool HandleHello(Client* client, absl::string_view payload, std::string* why);
  bool HandleRequest(Client* client, absl::string_view payload, std::string* why);
  void Park(Client* client, Op op, std::vector<std::string> keys, int64_t timeout_ms);
  void NotifyKey(const std::string& key);
  void Complete(Waiter* waiter, bool timed_out);
  // Answers a parked request with `reply` and releases its waiter.
  void Resume(Waiter* waiter, Writer reply);
  // kFail: remembers the first reason (when failures are kept) and answers
  // every parked request with it.
  void HandleFail(Client* client, const std::string& reason);
  void Unindex(Waiter* waiter);
  void DrainResumed();

  TcpStoreServer* owner_;
  TcpStoreServerOptions options_;
  uv_loop_t loop_;
  uv_tcp_t listener_;
  uv_async_t stop_async_;
  uv_timer_t sweep_timer_;  // drops connections that never said hello
  bool listener_open_ = false;
  KvTable table_;
  absl::flat_hash_map<std::string, std::vector<Waiter*>> waiting_;
  absl::flat_hash_set<Client*> clients_;
  std::vector<Client*> resumed_;  // clients whose parked request finished
  // Set once a rank reported a failed rendezvous (keep_failures only): what
  // every later hello and request is answered with.
  std::optional<std::string> failure_;
  char read_buffer_[64 * 1024];
};

absl::Status TcpStoreServer::Loop::Listen() {
  uv_loop_init(&loop_);
  loop_.data = this;
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
  for (const SocketAddress& candidate : candidates) {
    uv_tcp_init_ex(&loop_, &listener_, candidate.storage.ss_family);
    int rc = uv_tcp_bind(&listener_,
                         reinterpret_cast<const sockaddr*>(&candidate.storage), 0);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener_),
                                SOMAXCONN, &Loop::OnConnection);
    if (rc == 0) {
      listener_open_ = true;
      break;
    }
    in_use = in_use || rc == UV_EADDRINUSE;
    absl::StrAppend(&failures, failures.empty() ? "" : "; ",
                    candidate.ToString(), ": ", UvError(rc));
    uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);  // finishes the close
  }
  if (!listener_open_) {
    const std::string where = options_.bind_host.empty()
                                  ? FormatHostPort("*", options_.port)
                                  : FormatHostPort(options_.bind_host, options_.port);
    uv_loop_close(&loop_);
    if (in_use) {
      return absl::UnavailableError(absl::StrCat(
          "cannot listen on ", where,
          ": address already in use; pick another port or stop the job that "
          "is using it"));
    }
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", where, " (", failures,
        "); choose a bind address that belongs to this host"));
  }
  sockaddr_storage bound;
  int length = sizeof(bound);
  uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &length);
  SocketAddress address{bound, static_cast<socklen_t>(length)};
  owner_->address_ = address.ToString();
  owner_->port_ = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  uv_async_init(&loop_, &stop_async_, &Loop::OnStop);
  uv_timer_init(&loop_, &sweep_timer_);
  const uint64_t sweep_ms = static_cast<uint64_t>(std::clamp<int64_t>(
      absl::ToInt64Milliseconds(options_.hello_timeout) / 4, 10, 1000));
  uv_timer_start(&sweep_timer_, &Loop::OnSweep, sweep_ms, sweep_ms);
  return absl::OkStatus();
}

void TcpStoreServer::Loop::Run() {
  // A write to a client that vanished must fail with EPIPE, not kill the
  // process that hosts the server; SIGPIPE is thread-directed, so blocking
  // it on this thread is enough.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
}

void TcpStoreServer::Loop::OnStop(uv_async_t* async) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(async));
  std::vector<Client*> clients(self->clients_.begin(), self->clients_.end());
  for (Client* client : clients) self->Close(client);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->listener_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->stop_async_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&self->sweep_timer_), nullptr);
}

void TcpStoreServer::Loop::OnSweep(uv_timer_t* timer) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(timer));
  const uint64_t now = uv_now(&self->loop_);
  const uint64_t limit =
      static_cast<uint64_t>(absl::ToInt64Milliseconds(self->options_.hello_timeout));
  std::vector<Client*> silent;
  for (Client* client : self->clients_) {
    if (!client->authenticated && !client->closing && !client->close_after_write &&
        now - client->accepted_ms > limit) {
      silent.push_back(client);
    }
  }
  for (Client* client : silent) {
    self->Drop(client, absl::StrCat("no hello within ", limit, " ms"));
  }
}

void TcpStoreServer::Loop::OnConnection(uv_stream_t* server, int status) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(server));
  if (status < 0) {
    self->Log(absl::StrCat("accept failed: ", UvError(status)));
    return;
  }
  auto* client = new Client();
  uv_tcp_init(&self->loop_, &client->handle);
  client->handle.data = client;
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&client->handle)) != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&client->handle), &Loop::OnClientClosed);
    return;
  }
  self->clients_.insert(client);
  client->accepted_ms = uv_now(&self->loop_);
  uv_tcp_nodelay(&client->handle, 1);
  sockaddr_storage peer;
  int length = sizeof(peer);
  if (uv_tcp_getpeername(&client->handle, reinterpret_cast<sockaddr*>(&peer),
                         &length) == 0) {
    client->peer = SocketAddress{peer, static_cast<socklen_t>(length)}.ToString();
  } else {
    client->peer = "unknown peer";
  }
  uv_read_start(reinterpret_cast<uv_stream_t*>(&client->handle), &Loop::OnAlloc,
                &Loop::OnRead);
}

void TcpStoreServer::Loop::OnAlloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
  Loop* self = From(handle);
  // One loop thread: the buffer is consumed by OnRead before the next alloc.
  *buf = uv_buf_init(self->read_buffer_, sizeof(self->read_buffer_));
}

void TcpStoreServer::Loop::OnRead(uv_stream_t* stream, ssize_t nread,
                                  const uv_buf_t* buf) {
  Loop* self = From(reinterpret_cast<uv_handle_t*>(stream));
  Client* client = static_cast<Client*>(stream->data);
  if (nread < 0) {
    self->Close(client);  // EOF or reset: the client left
    self->DrainResumed();
    return;
  }
  if (client->closing || nread == 0) return;
  client->input.append(buf->base, static_cast<size_t>(nread));
  // A client may send ahead while a request is parked; bound what we keep.
  if (client->input.size() > protocol::kMaxFrameBytes + 2 * protocol::kFrameHeaderBytes &&
      client->parked != nullptr) {
    self->Drop(client, "sent too much data while a request was waiting");
  } else {
    self->ProcessInput(client);
  }
  self->DrainResumed();
}

void TcpStoreServer::Loop::ProcessInput(Client* client) {
  size_t offset = 0;
  while (!client->closing && !client->close_after_write && client->parked == nullptr) {
    const size_t available = client->input.size() - offset;
    if (available < protocol::kFrameHeaderBytes) break;
    const uint32_t length = protocol::DecodeLength(client->input.data() + offset);
    const size_t limit = client->authenticated ? protocol::kMaxFrameBytes
                                               : protocol::kMaxHelloBytes;
    if (length > limit) {
      Drop(client, absl::StrCat("frame of ", length, " bytes exceeds the limit of ",
                                limit, " bytes"));
      return;
    }
    if (available < protocol::kFrameHeaderBytes + length) break;
    const absl::string_view payload(
        client->input.data() + offset + protocol::kFrameHeaderBytes, length);
    offset += protocol::kFrameHeaderBytes + length;
    std::string why;
    const bool ok = client->authenticated ? HandleRequest(client, payload, &why)
                                          : HandleHello(client, payload, &why);
    if (!ok) {
      Drop(client, why);
      return;
    }
  }
  if (!client->closing) client->input.erase(0, offset);
}

bool TcpStoreServer::Loop::HandleHello(Client* client, absl::string_view payload,
                                       std::string* why) {
  Reader reader(payload);
  uint32_t magic = 0;
  uint16_t version = 0;
  std::string token;
  if (!reader.U32(&magic) || magic != protocol::kMagic) {
    *why = "not a dist store client (bad magic in the first frame)";
    return false;
  }
  if (!reader.U16(&version) || !reader.Str(protocol::kMaxTokenBytes, &token) ||
      !reader.done()) {
    *why = "malformed hello frame";
    return false;
  }
  Writer reply;
  reply.U32(protocol::kMagic);
  reply.U16(protocol::kVersion);
  if (version < protocol::kMinVersion || version > protocol::kVersion) {
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition));
    reply.Str(absl::StrCat("the store server at ", owner_->address_,
                           " speaks protocol versions ", protocol::kMinVersion, " to ",
                           protocol::kVersion, " but this client speaks ", version,
                           "; run the same dist release on every rank"));
    Log(absl::StrCat("refusing client ", client->peer, ": protocol version ", version));
  } else if (!options_.token.empty() && !SameToken(token, options_.token)) {
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kUnauthenticated));
    reply.Str(absl::StrCat(
        "the store server at ", owner_->address_,
        token.empty() ? " requires a token and none was given"
                      : " refused the token",
        "; set the same DIST_STORE_TOKEN (or the store_token option) on every "
        "rank and on the server"));
    Log(absl::StrCat("refusing client ", client->peer, ": ",
                     token.empty() ? "no token" : "wrong token"));
  } else if (failure_.has_value()) {
    // A late rank: the rendezvous it wants to join is over. Checked after
    // the token, so only the job's own ranks hear the reason.
    reply.U8(static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition));
    reply.Str(*failure_);
  } else {
    reply.U8(0);
    reply.Str("");
    client->authenticated = true;
    absl::MutexLock lock(&owner_->mu_);
    ++owner_->clients_;
  }
  if (!client->authenticated) {
    client->close_after_write = true;
    ++owner_->dropped_;
  }
  Send(client, std::move(reply).Finish());
  return true;
}

bool TcpStoreServer::Loop::HandleRequest(Client* client, absl::string_view payload,
                                         std::string* why) {
  Reader reader(payload);
  uint8_t raw_op = 0;
  if (!reader.U8(&raw_op)) {
    *why = "empty request frame";
    return false;
  }
  const Op op = static_cast<Op>(raw_op);
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
  auto read_keys = [&](std::vector<std::string>* keys) {
    uint32_t count = 0;
    if (!reader.U32(&count) || count > reader.remaining() / 4) return false;
    keys->resize(count);
    for (std::string& k : *keys) {
      if (!reader.Str(kMaxKeyBytes, &k) || k.empty()) return false;
    }
    return true;
  };
  Writer reply;
  switch (op) {
    case Op::kSet: {
      std::string value;
      if (!reader.Str(kMaxValueBytes, &value) || !reader.done()) break;
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
      absl::StatusOr<int64_t> result = table_.Add(key, delta);
      if (!result.ok()) {
        SendError(client, result.status().code(), std::string(result.status().message()));
      } else {
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
      if (!reader.U8(&has_expected) || has_expected > 1 ||
          !reader.Str(kMaxValueBytes, &expected) ||
          !reader.Str(kMaxValueBytes, &desired) || !reader.done()) {
        break;
      }
      bool swapped = false;
      std::optional<std::string> wanted;
      if (has_expected) wanted = std::move(expected);
      std::string actual = table_.CompareSet(key, wanted, desired, &swapped);
      if (swapped) NotifyKey(key);
      reply.U8(0);
      reply.Str(actual);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kRemove: {
      if (!reader.done()) break;
      const bool existed = table_.Remove(key);
      reply.U8(0);
      reply.U8(existed ? 1 : 0);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kCheck: {
      std::vector<std::string> keys;
      if (!read_keys(&keys) || !reader.done()) break;
      reply.U8(0);
      reply.U8(table_.Missing(keys).empty() ? 1 : 0);
      Send(client, std::move(reply).Finish());
      ++owner_->served_;
      return true;
    }
    case Op::kWait: {
      std::vector<std::string> keys;
      int64_t timeout_ms = 0;
      if (!read_keys(&keys) || !reader.I64(&timeout_ms) || !reader.done()) break;
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
    Log(absl::StrCat("client ", client->peer, " reports that its rendezvous failed: ", line,
                     " (still serving: this server outlives jobs)"));
    return;
  }
  if (failure_.has_value()) return;  // the first reason stands
  const std::string where =
      options_.advertised_host.empty()
          ? owner_->address_
          : FormatHostPort(options_.advertised_host, owner_->port_);
  failure_ = absl::StrCat("tcp://", where, ": the rendezvous on this store already failed: ",
                          line, "; start all ranks again");
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

void TcpStoreServer::Loop::Park(Client* client, Op op, std::vector<std::string> keys,
                                int64_t timeout_ms) {
  auto* waiter = new Waiter();
  waiter->client = client;
  waiter->op = op;
  waiter->timeout_ms = std::max<int64_t>(timeout_ms, 0);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  waiter->keys = std::move(keys);
  for (const std::string& key : table_.Missing(waiter->keys)) {
    waiting_[key].push_back(waiter);
    ++waiter->missing;
  }
  client->parked = waiter;
  uv_timer_init(&loop_, &waiter->timer);
  waiter->timer.data = waiter;
  uv_timer_start(&waiter->timer, &Loop::OnWaiterTimeout,
                 static_cast<uint64_t>(waiter->timeout_ms), 0);
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
    reply.Str(absl::StrCat("timed out after ", waiter->timeout_ms,
                           " ms waiting for store key", missing.size() == 1 ? " " : "s ",
                           DescribeKeys(missing), " (not set by any rank yet)"));
  } else {
    reply.U8(0);
    if (waiter->op == Op::kGet) {
      const std::string* value = table_.Find(waiter->keys[0]);
      reply.Str(value == nullptr ? std::string() : *value);
    }
  }
  Resume(waiter, std::move(reply));
}

void TcpStoreServer::Loop::Resume(Waiter* waiter, Writer reply) {
  Client* client = waiter->client;
  client->parked = nullptr;
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
    if (!client->closing && client->parked == nullptr) ProcessInput(client);
  }
}

void TcpStoreServer::Loop::Send(Client* client, std::string frame) {
  if (client->closing) return;
  auto* write = new WriteRequest();
  write->data = std::move(frame);
  write->client = client;
  uv_buf_t buf = uv_buf_init(write->data.data(),
                             static_cast<unsigned int>(write->data.size()));
  const int rc = uv_write(&write->request,
                          reinterpret_cast<uv_stream_t*>(&client->handle), &buf, 1,
                          &Loop::OnWrite);
  if (rc < 0) {
    delete write;
    Close(client);
  }
}

void TcpStoreServer::Loop::SendError(Client* client, absl::StatusCode code,
                                     const std::string& message) {
  Writer reply;
  reply.U8(static_cast<uint8_t>(code));
  reply.Str(message);
  Send(client, std::move(reply).Finish());
}

void TcpStoreServer::Loop::OnWrite(uv_write_t* request, int status) {
  auto* write = reinterpret_cast<WriteRequest*>(request);
  Client* client = write->client;
  delete write;
  if (client->closing) return;
  Loop* self = From(reinterpret_cast<uv_handle_t*>(&client->handle));
  if (status < 0 || client->close_after_write) self->Close(client);
}

void TcpStoreServer::Loop::Drop(Client* client, const std::string& reason) {
  Log(absl::StrCat("dropping store client ", client->peer, ": ", reason));
  ++owner_->dropped_;
  Close(client);
}

void TcpStoreServer::Loop::Close(Client* client) {
  if (client->closing) return;
  client->closing = true;
  if (Waiter* waiter = client->parked) {
    client->parked = nullptr;
    Unindex(waiter);
    uv_timer_stop(&waiter->timer);
    uv_close(reinterpret_cast<uv_handle_t*>(&waiter->timer),
             [](uv_handle_t* handle) { delete static_cast<Waiter*>(handle->data); });
  }
  if (client->authenticated) {
    absl::MutexLock lock(&owner_->mu_);
    --owner_->clients_;
  }
  clients_.erase(client);
  uv_close(reinterpret_cast<uv_handle_t*>(&client->handle), &Loop::OnClientClosed);
}

void TcpStoreServer::Loop::OnClientClosed(uv_handle_t* handle) {
  delete static_cast<Client*>(handle->data);
}

absl::StatusOr<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    TcpStoreServerOptions options) {
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

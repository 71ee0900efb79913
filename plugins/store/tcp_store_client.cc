#include "plugins/store/tcp_store_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "dist/cpp/status.hpp"
#include "plugins/store/limits.h"
#include "plugins/store/protocol.h"
#include "support/auth.h"

namespace dist::store {
namespace {

using protocol::Op;
using protocol::Reader;
using protocol::Writer;

// A parked get/wait is answered by the server at its timeout; the client
// allows this much more before it gives up on the socket itself.
constexpr absl::Duration kServerGrace = absl::Seconds(2);
// Once the server has been reached, a lost server is reported quickly
// instead of being retried for the whole timeout.
constexpr absl::Duration kReconnectWindow = absl::Seconds(2);
// Retries of an unreachable server back off to this: a rank that started
// before rank 0's server is late by at most this much once it is up.
constexpr absl::Duration kMaxConnectBackoff = absl::Milliseconds(200);

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

absl::Status Malformed(const std::string& address) {
  return absl::DataLossError(absl::StrCat("malformed response from the store server at ", address,
                                          "; is another service listening on that port?"));
}

void PutKeys(Writer& w, const std::vector<std::string>& keys) {
  w.U32(static_cast<uint32_t>(keys.size()));
  for (const std::string& key : keys) w.Str(key);
}

absl::Status ValidateKeys(const std::vector<std::string>& keys) {
  size_t total = 0;
  for (const std::string& key : keys) {
    DIST_RETURN_IF_ERROR(ValidateKey(key));
    total += key.size() + 4;
  }
  if (total > protocol::kMaxFrameBytes - 64) {
    return absl::InvalidArgumentError(absl::StrCat("a check/wait on ", keys.size(),
                                                   " keys is too large for one request; "
                                                   "split it into smaller groups"));
  }
  return absl::OkStatus();
}

}  // namespace

TcpStoreClient::TcpStoreClient(TcpStoreClientOptions options)
    : options_(std::move(options)), address_(FormatHostPort(options_.host, options_.port)) {}

TcpStoreClient::~TcpStoreClient() { Disconnect(); }

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    TcpStoreClientOptions options) {
  if (options.token.size() > protocol::kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("store token is ", options.token.size(),
                                                   " bytes; the limit is ",
                                                   protocol::kMaxTokenBytes));
  }
  std::unique_ptr<TcpStoreClient> client(new TcpStoreClient(std::move(options)));
  absl::StatusOr<std::unique_ptr<Connection>> connection =
      client->Open(absl::Now() + client->options_.timeout);
  if (!connection.ok()) return connection.status();
  absl::MutexLock lock(&client->mu_);
  client->idle_.push_back(*std::move(connection));
  return client;
}

void TcpStoreClient::Disconnect() {
  std::vector<std::unique_ptr<Connection>> closing;
  absl::MutexLock lock(&mu_);
  closing.swap(idle_);
}

absl::StatusOr<std::unique_ptr<Connection>> TcpStoreClient::Open(absl::Time deadline) {
  bool reconnect = false;
  {
    absl::MutexLock lock(&mu_);
    reconnect = ever_connected_;
  }
  const absl::Time start = absl::Now();
  if (reconnect) deadline = std::min(deadline, start + kReconnectWindow);
  // The first retries come fast: ranks usually start within milliseconds
  // of rank 0's server, and a refused connect costs microseconds.
  absl::Duration backoff = absl::Milliseconds(1);
  std::string last_error = "no attempt made";
  bool out_of_descriptors = false;  // the last attempt could not open a socket
  while (true) {
    absl::StatusOr<std::vector<SocketAddress>> addresses =
        Resolve(options_.host, options_.port, /*passive=*/false);
    if (!addresses.ok()) {
      last_error = std::string(addresses.status().message());
    } else {
      for (const SocketAddress& address : *addresses) {
        // Each attempt gets a slice, so a black-holed address cannot eat
        // the whole timeout before the next one is tried.
        const absl::Time attempt_deadline = std::min(deadline, absl::Now() + absl::Seconds(5));
        absl::StatusOr<std::unique_ptr<Connection>> connection =
            Connection::Connect(address, attempt_deadline);
        if (!connection.ok()) {
          last_error = absl::StrCat(address.ToString(), ": ", connection.status().message());
          out_of_descriptors = absl::IsResourceExhausted(connection.status());
          continue;
        }
        out_of_descriptors = false;
        bool retry = false;
        absl::Status handshake = Handshake(**connection, attempt_deadline, &retry);
        if (handshake.ok()) {
          absl::MutexLock lock(&mu_);
          ever_connected_ = true;
          return connection;
        }
        if (!retry) return handshake;  // refused, or not our server: retrying cannot help
        last_error = absl::StrCat(address.ToString(), ": handshake: ", handshake.message());
      }
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, kMaxConnectBackoff);
  }
  if (reconnect) {
    return absl::UnavailableError(absl::StrCat(
        "the store server at ", address_, " is gone (", last_error,
        "); rank 0 (or the distrun or dist_store_server hosting the store) exited or crashed"));
  }
  if (out_of_descriptors) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "could not reach the store at ", address_, " within ", Seconds(absl::Now() - start),
        ": this rank cannot open a socket (", last_error, ")"));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("could not reach the store at ", address_, " within ",
                   Seconds(absl::Now() - start), " (last error: ", last_error,
                   "); check that rank 0 (or the distrun or dist_store_server hosting the store) "
                   "is running and that the host and port are right"));
}

absl::Status TcpStoreClient::Handshake(Connection& connection, absl::Time deadline, bool* retry) {
  *retry = true;  // a lost connection or a timeout is retried
  const std::string client_nonce = support::auth::Nonce();
  if (client_nonce.empty()) {
    *retry = false;
    return absl::InternalError("could not draw a random nonce for the store handshake");
  }
  Writer hello;
  hello.U32(protocol::kMagic);
  hello.U16(protocol::kVersion);
  hello.Str(client_nonce);
  DIST_RETURN_IF_ERROR(connection.SendAll(std::move(hello).Finish(), deadline));
  absl::StatusOr<std::string> challenge =
      connection.ReceiveFrame(protocol::kMaxHandshakeBytes, deadline);
  if (!challenge.ok()) return challenge.status();
  *retry = false;
  Reader reader(*challenge);
  uint32_t magic = 0;
  uint16_t version = 0;
  uint8_t code = 0;
  std::string message;
  if (!reader.U32(&magic) || magic != protocol::kMagic || !reader.U16(&version)) {
    return Malformed(address_);
  }
  if (version != protocol::kVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the store server at ", address_, " speaks protocol version ", version,
        " but this client speaks version ", protocol::kVersion,
        " (challenge-response, the token never sent); run the same dist release on every "
        "rank"));
  }
  if (!reader.U8(&code) || !reader.Str(protocol::kMaxHandshakeBytes, &message)) {
    return Malformed(address_);
  }
  if (code != 0) {
    // The only refusal worth retrying: a full server may have room later.
    *retry = code == static_cast<uint8_t>(absl::StatusCode::kResourceExhausted);
    return absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  std::string server_nonce, server_proof;
  uint8_t token_required = 0;
  if (!reader.Str(support::auth::kNonceBytes, &server_nonce) ||
      server_nonce.size() != support::auth::kNonceBytes || !reader.U8(&token_required) ||
      !reader.Str(support::auth::kProofBytes, &server_proof) || !reader.done()) {
    return Malformed(address_);
  }
  const std::string& token = options_.token;
  if (!token.empty() && !support::auth::ProofMatches(token, support::auth::Role::kServer,
                                                     client_nonce, server_nonce, server_proof)) {
    // Checked before anything that depends on the token is sent: a program
    // squatting on the port, or another job's store, learns nothing.
    return absl::UnauthenticatedError(absl::StrCat(
        "the store server at ", address_,
        token_required ? " could not prove that it holds this rank's token"
                       : " does not know this rank's token (it requires none)",
        " (DIST_STORE_TOKEN): the ranks were given different tokens, or the port belongs to "
        "another job's store or another program; check the host and port (MASTER_ADDR, "
        "MASTER_PORT or the URL) and give every rank and the server the same "
        "DIST_STORE_TOKEN"));
  }
  // Without a token and asked for one, the empty proof below is refused
  // with the server's own message (and the server logs the refusal).
  Writer proof;
  proof.Str(token.empty() ? std::string()
                          : support::auth::Proof(token, support::auth::Role::kClient, client_nonce,
                                                 server_nonce));
  *retry = true;
  DIST_RETURN_IF_ERROR(connection.SendAll(std::move(proof).Finish(), deadline));
  absl::StatusOr<std::string> welcome =
      connection.ReceiveFrame(protocol::kMaxHandshakeBytes, deadline);
  if (!welcome.ok()) return welcome.status();
  *retry = false;
  Reader result(*welcome);
  if (!result.U8(&code) || !result.Str(protocol::kMaxHandshakeBytes, &message) || !result.done()) {
    return Malformed(address_);
  }
  if (code != 0) {
    // A full server (max_connections) may have room later.
    *retry = code == static_cast<uint8_t>(absl::StatusCode::kResourceExhausted);
    return absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Connection>> TcpStoreClient::Acquire(absl::Time deadline,
                                                                    bool* pooled) {
  *pooled = true;
  {
    absl::MutexLock lock(&mu_);
    while (!idle_.empty()) {
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      // One the server closed while it sat idle (it drops idle connections
      // when it runs short) is replaced, not reported as a lost server.
      if (connection->PeerClosed()) continue;
      return connection;
    }
  }
  *pooled = false;
  return Open(deadline);
}

absl::StatusOr<std::string> TcpStoreClient::Call(std::string frame, absl::Time deadline,
                                                 bool* set_aside) {
  if (set_aside != nullptr) *set_aside = false;
  bool pooled = false;
  absl::StatusOr<std::unique_ptr<Connection>> connection = Acquire(deadline, &pooled);
  if (!connection.ok()) return connection.status();
  auto exchange = [&frame, deadline](Connection& over) {
    absl::Status sent = over.SendAll(frame, deadline);
    return sent.ok() ? over.ReceiveFrame(protocol::kMaxFrameBytes, deadline)
                     : absl::StatusOr<std::string>(sent);
  };
  const uint64_t received = (*connection)->bytes_received();
  absl::StatusOr<std::string> response = exchange(**connection);
  if (!response.ok() && pooled && !absl::IsDeadlineExceeded(response.status()) &&
      (*connection)->closed_by_peer() && (*connection)->bytes_received() == received) {
    // The server closed this pooled connection as idle (it evicts idle
    // ones when it is full) while the request was on its way: it evicts only
    // connections with nothing unread, so the request was not processed.
    // Once more on a new connection; if none can be had, the first failure
    // is what is reported.
    absl::StatusOr<std::unique_ptr<Connection>> fresh = Open(deadline);
    if (fresh.ok()) {
      connection = std::move(fresh);
      response = exchange(**connection);
    }
  }
  if (!response.ok()) {
    // The connection is dropped (not pooled): its stream may be mid-frame.
    if (absl::IsDeadlineExceeded(response.status())) {
      return absl::DeadlineExceededError(
          absl::StrCat("no answer from the store server at ", address_,
                       " before the deadline; the server is overloaded or unreachable"));
    }
    return absl::UnavailableError(absl::StrCat("lost the connection to the store server at ",
                                               address_, " (", response.status().message(),
                                               "); rank 0 (or the distrun or dist_store_server "
                                               "hosting the store) exited or the network failed"));
  }
  Reader reader(*response);
  uint8_t code = 0;
  if (!reader.U8(&code)) return Malformed(address_);
  if (code != 0) {
    std::string message;
    if (!reader.Str(protocol::kMaxFrameBytes, &message)) return Malformed(address_);
    if (set_aside != nullptr) *set_aside = code == protocol::kSetAsideCode;
    absl::MutexLock lock(&mu_);
    idle_.push_back(*std::move(connection));
    return absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  std::string body = response->substr(1);
  absl::MutexLock lock(&mu_);
  idle_.push_back(*std::move(connection));
  return body;
}

absl::StatusOr<std::string> TcpStoreClient::CallWaiting(Op op, const std::string& fields,
                                                        absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
    Writer w;
    w.U8(static_cast<uint8_t>(op));
    w.Append(fields);
    w.I64(absl::ToInt64Milliseconds(left));
    bool set_aside = false;
    absl::StatusOr<std::string> body =
        Call(std::move(w).Finish(), absl::Now() + left + kServerGrace, &set_aside);
    if (!set_aside) return body;
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out after ", absl::ToInt64Milliseconds(timeout),
          " ms waiting on the store server at ", address_,
          ", which kept setting the wait aside for lack of room (", body.status().message(), ")"));
    }
  }
}

absl::Status TcpStoreClient::Set(const std::string& key, const std::string& value) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  DIST_RETURN_IF_ERROR(ValidateValue(key, value.size()));
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kSet));
  w.Str(key);
  w.Str(value);
  return Call(std::move(w).Finish(), absl::Now() + options_.timeout).status();
}

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key, absl::Duration timeout) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  Writer w;
  w.Str(key);
  absl::StatusOr<std::string> body = CallWaiting(Op::kGet, w.Payload(), timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  std::string value;
  if (!reader.Str(kMaxValueBytes, &value)) return Malformed(address_);
  return value;
}

absl::StatusOr<int64_t> TcpStoreClient::Add(const std::string& key, int64_t delta) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kAdd));
  w.Str(key);
  w.I64(delta);
  absl::StatusOr<std::string> body = Call(std::move(w).Finish(), absl::Now() + options_.timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  int64_t value = 0;
  if (!reader.I64(&value)) return Malformed(address_);
  return value;
}

absl::StatusOr<std::string> TcpStoreClient::CompareSet(const std::string& key,
                                                       const std::optional<std::string>& expected,
                                                       const std::string& desired) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  if (expected) DIST_RETURN_IF_ERROR(ValidateValue(key, expected->size()));
  DIST_RETURN_IF_ERROR(ValidateValue(key, desired.size()));
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kCompareSet));
  w.Str(key);
  w.U8(expected.has_value() ? 1 : 0);
  w.Str(expected.value_or(""));
  w.Str(desired);
  absl::StatusOr<std::string> body = Call(std::move(w).Finish(), absl::Now() + options_.timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  std::string actual;
  if (!reader.Str(kMaxValueBytes, &actual)) return Malformed(address_);
  return actual;
}

absl::StatusOr<bool> TcpStoreClient::Remove(const std::string& key) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kRemove));
  w.Str(key);
  absl::StatusOr<std::string> body = Call(std::move(w).Finish(), absl::Now() + options_.timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  uint8_t existed = 0;
  if (!reader.U8(&existed)) return Malformed(address_);
  return existed != 0;
}

absl::StatusOr<bool> TcpStoreClient::Check(const std::vector<std::string>& keys) {
  DIST_RETURN_IF_ERROR(ValidateKeys(keys));
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kCheck));
  PutKeys(w, keys);
  absl::StatusOr<std::string> body = Call(std::move(w).Finish(), absl::Now() + options_.timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  uint8_t all = 0;
  if (!reader.U8(&all)) return Malformed(address_);
  return all != 0;
}

absl::Status TcpStoreClient::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  DIST_RETURN_IF_ERROR(ValidateKeys(keys));
  Writer w;
  PutKeys(w, keys);
  return CallWaiting(Op::kWait, w.Payload(), timeout).status();
}

absl::StatusOr<int64_t> TcpStoreClient::NumKeys() {
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kNumKeys));
  absl::StatusOr<std::string> body = Call(std::move(w).Finish(), absl::Now() + options_.timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  int64_t count = 0;
  if (!reader.I64(&count)) return Malformed(address_);
  return count;
}

void TcpStoreClient::Abandon(const std::string& reason) {
  // Only over a connection already open: when the server is gone (rank 0
  // crashed), reconnecting would delay this rank's error for nothing.
  std::unique_ptr<Connection> connection;
  {
    absl::MutexLock lock(&mu_);
    if (idle_.empty()) return;
    connection = std::move(idle_.back());
    idle_.pop_back();
  }
  std::string line = reason;
  if (!options_.reporter.empty()) absl::StrAppend(&line, " (reported by ", options_.reporter, ")");
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kFail));
  w.Str(protocol::OneLineReason(line));
  // Short: the rank is failing already; the answer only says it arrived.
  const absl::Time deadline = absl::Now() + std::min(options_.timeout, absl::Seconds(2));
  if (!connection->SendAll(std::move(w).Finish(), deadline).ok()) return;
  if (!connection->ReceiveFrame(protocol::kMaxFrameBytes, deadline).ok()) return;
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(connection));
}

}  // namespace dist::store

#include "plugins/store/tcp_store_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "dist/cpp/status.hpp"
#include "plugins/store/limits.h"
#include "plugins/store/protocol.h"

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

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

absl::Status Malformed(const std::string& address) {
  return absl::DataLossError(absl::StrCat(
      "malformed response from the store server at ", address,
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
    return absl::InvalidArgumentError(absl::StrCat(
        "a check/wait on ", keys.size(), " keys is too large for one request; "
        "split it into smaller groups"));
  }
  return absl::OkStatus();
}

}  // namespace

TcpStoreClient::TcpStoreClient(TcpStoreClientOptions options)
    : options_(std::move(options)),
      address_(FormatHostPort(options_.host, options_.port)) {}

TcpStoreClient::~TcpStoreClient() { Disconnect(); }

absl::StatusOr<std::unique_ptr<TcpStoreClient>> TcpStoreClient::Connect(
    TcpStoreClientOptions options) {
  if (options.token.size() > protocol::kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "store token is ", options.token.size(), " bytes; the limit is ",
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
  // Lowered when a server older than this client refuses our version.
  uint16_t hello_version = protocol::kVersion;
  {
    absl::MutexLock lock(&mu_);
    reconnect = ever_connected_;
    if (server_version_ != 0) hello_version = std::min(hello_version, server_version_);
  }
  const absl::Time start = absl::Now();
  if (reconnect) deadline = std::min(deadline, start + kReconnectWindow);
  absl::Duration backoff = absl::Milliseconds(10);
  std::string last_error = "no attempt made";
  while (true) {
    absl::StatusOr<std::vector<SocketAddress>> addresses =
        Resolve(options_.host, options_.port, /*passive=*/false);
    if (!addresses.ok()) {
      last_error = std::string(addresses.status().message());
    } else {
      for (const SocketAddress& address : *addresses) {
        // Each attempt gets a slice, so a black-holed address cannot eat
        // the whole timeout before the next one is tried.
        const absl::Time attempt_deadline =
            std::min(deadline, absl::Now() + absl::Seconds(5));
        absl::StatusOr<std::unique_ptr<Connection>> connection =
            Connection::Connect(address, attempt_deadline);
        if (!connection.ok()) {
          last_error = absl::StrCat(address.ToString(), ": ",
                                    connection.status().message());
          continue;
        }
        Writer hello;
        hello.U32(protocol::kMagic);
        hello.U16(hello_version);
        hello.Str(options_.token);
        absl::Status sent = (*connection)->SendAll(std::move(hello).Finish(),
                                                   attempt_deadline);
        absl::StatusOr<std::string> reply =
            sent.ok() ? (*connection)->ReceiveFrame(protocol::kMaxHelloBytes,
                                                    attempt_deadline)
                      : absl::StatusOr<std::string>(sent);
        if (!reply.ok()) {
          last_error = absl::StrCat(address.ToString(), ": handshake: ",
                                    reply.status().message());
          continue;
        }
        Reader reader(*reply);
        uint32_t magic = 0;
        uint16_t version = 0;
        uint8_t code = 0;
        std::string message;
        if (!reader.U32(&magic) || magic != protocol::kMagic ||
            !reader.U16(&version) || !reader.U8(&code) ||
            !reader.Str(protocol::kMaxHelloBytes, &message)) {
          return Malformed(address_);
        }
        if (code != 0 && version >= protocol::kMinVersion && version < hello_version &&
            code == static_cast<uint8_t>(absl::StatusCode::kFailedPrecondition)) {
          // An older server that does not speak our version: speak its.
          hello_version = version;
          last_error = absl::StrCat(address.ToString(), ": ", message);
          break;
        }
        if (code != 0) {  // refused: retrying cannot help
          return absl::Status(static_cast<absl::StatusCode>(code), message);
        }
        absl::MutexLock lock(&mu_);
        ever_connected_ = true;
        server_version_ = version;
        return connection;
      }
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  if (reconnect) {
    return absl::UnavailableError(absl::StrCat(
        "the store server at ", address_, " is gone (", last_error,
        "); rank 0 (or dist_store_server) exited or crashed"));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "could not reach the store at ", address_, " within ",
      Seconds(absl::Now() - start), " (last error: ", last_error,
      "); check that rank 0 (or dist_store_server) is running and that the "
      "host and port are right"));
}

absl::StatusOr<std::unique_ptr<Connection>> TcpStoreClient::Acquire(
    absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  return Open(deadline);
}

absl::StatusOr<std::string> TcpStoreClient::Call(std::string frame,
                                                 absl::Time deadline) {
  absl::StatusOr<std::unique_ptr<Connection>> connection = Acquire(deadline);
  if (!connection.ok()) return connection.status();
  absl::Status sent = (*connection)->SendAll(frame, deadline);
  absl::StatusOr<std::string> response =
      sent.ok() ? (*connection)->ReceiveFrame(protocol::kMaxFrameBytes, deadline)
                : absl::StatusOr<std::string>(sent);
  if (!response.ok()) {
    // The connection is dropped (not pooled): its stream may be mid-frame.
    if (absl::IsDeadlineExceeded(response.status())) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no answer from the store server at ", address_,
          " before the deadline; the server is overloaded or unreachable"));
    }
    return absl::UnavailableError(absl::StrCat(
        "lost the connection to the store server at ", address_, " (",
        response.status().message(),
        "); rank 0 (or dist_store_server) exited or the network failed"));
  }
  Reader reader(*response);
  uint8_t code = 0;
  if (!reader.U8(&code)) return Malformed(address_);
  if (code != 0) {
    std::string message;
    if (!reader.Str(protocol::kMaxFrameBytes, &message)) return Malformed(address_);
    absl::MutexLock lock(&mu_);
    idle_.push_back(*std::move(connection));
    return absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  std::string body = response->substr(1);
  absl::MutexLock lock(&mu_);
  idle_.push_back(*std::move(connection));
  return body;
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

absl::StatusOr<std::string> TcpStoreClient::Get(const std::string& key,
                                                absl::Duration timeout) {
  DIST_RETURN_IF_ERROR(ValidateKey(key));
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kGet));
  w.Str(key);
  w.I64(absl::ToInt64Milliseconds(timeout));
  absl::StatusOr<std::string> body =
      Call(std::move(w).Finish(), absl::Now() + timeout + kServerGrace);
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
  absl::StatusOr<std::string> body =
      Call(std::move(w).Finish(), absl::Now() + options_.timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  int64_t value = 0;
  if (!reader.I64(&value)) return Malformed(address_);
  return value;
}

absl::StatusOr<std::string> TcpStoreClient::CompareSet(
    const std::string& key, const std::optional<std::string>& expected,
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
  absl::StatusOr<std::string> body =
      Call(std::move(w).Finish(), absl::Now() + options_.timeout);
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
  absl::StatusOr<std::string> body =
      Call(std::move(w).Finish(), absl::Now() + options_.timeout);
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
  absl::StatusOr<std::string> body =
      Call(std::move(w).Finish(), absl::Now() + options_.timeout);
  if (!body.ok()) return body.status();
  Reader reader(*body);
  uint8_t all = 0;
  if (!reader.U8(&all)) return Malformed(address_);
  return all != 0;
}

absl::Status TcpStoreClient::Wait(const std::vector<std::string>& keys,
                                  absl::Duration timeout) {
  DIST_RETURN_IF_ERROR(ValidateKeys(keys));
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kWait));
  PutKeys(w, keys);
  w.I64(absl::ToInt64Milliseconds(timeout));
  return Call(std::move(w).Finish(), absl::Now() + timeout + kServerGrace).status();
}

absl::StatusOr<int64_t> TcpStoreClient::NumKeys() {
  Writer w;
  w.U8(static_cast<uint8_t>(Op::kNumKeys));
  absl::StatusOr<std::string> body =
      Call(std::move(w).Finish(), absl::Now() + options_.timeout);
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
    if (server_version_ < protocol::kFailVersion || idle_.empty()) return;
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

// TcpStoreServer::Loop: cutting a client's input into frames (and refusing
// those over the limits), serving requests on the table, and kFail.
#include <uv.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "plugins/store/kv_table.h"
#include "plugins/store/limits.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_server_loop.h"

namespace dist::store {

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
    if (!options_.log_failure_reports) return;
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

}  // namespace dist::store

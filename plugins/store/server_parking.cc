// TcpStoreServer::Loop: gets and waits parked until their keys are set or
// their timeout passes, the index of waiting keys, and the room parked
// requests may hold (the largest is set aside for a newer one).
#include <uv.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "plugins/store/limits.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_server_loop.h"

namespace dist::store {
namespace {

// What parking a request on `keys` holds: each key in the waiter and, while
// missing, in the index of waiting keys.
size_t ParkedBytes(const std::vector<std::string>& keys) {
  size_t bytes = 0;
  for (const std::string& key : keys) bytes += 2 * (key.size() + sizeof(std::string)) + 16;
  return bytes;
}

}  // namespace

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

}  // namespace dist::store

// TcpStoreServer::Loop: reading requests and writing replies, the flight
// budget (what clients hold in buffers, and who is held back for it), the
// clients' poll events, and dropping and closing clients.
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "plugins/store/protocol.h"
#include "plugins/store/tcp_store_server_loop.h"

namespace dist::store {

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
  uv_close(reinterpret_cast<uv_handle_t*>(&client->poll), &Loop::OnClientClosed);
  // Closing the handle takes the descriptor out of epoll at once (libuv
  // touches it no more), so it is closed now, not in the close callback: a
  // connection evicted to make room frees its descriptor for the newcomer
  // in the same turn. Not before uv_close, which names the descriptor to
  // epoll once more (a number another thread may have reused by then).
  close(client->fd);
  client->fd = -1;
  if (flight_bytes_ < FlightLimit() && !budget_paused_.empty()) ResumeBudgetPaused();
}

void TcpStoreServer::Loop::OnClientClosed(uv_handle_t* handle) {
  auto* client = static_cast<Client*>(handle->data);
  // Still listed as budget-paused or resumed? Those lists are drained in
  // the same loop turn as the close, before this callback runs.
  delete client;
}

}  // namespace dist::store

#include "plugins/backends/shm/point_to_point.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"
#include "plugins/backends/shm/layout.h"

namespace dist_shm {
namespace {

constexpr uint64_t kAlign = sizeof(MessageHeader);

uint64_t Padded(uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

absl::Status PointToPoint::Write(int peer, const char* data, uint64_t bytes,
                                 const OpContext& context) {
  RingControl& ring = segment_->ring(rank_, peer);
  char* base = segment_->ring_data(rank_, peer);
  const uint64_t capacity = segment_->ring_bytes();
  uint64_t head = ring.head.load(std::memory_order_relaxed);
  uint64_t free_bytes = 0;
  while (bytes > 0) {
    auto ready = [&]() {
      free_bytes = capacity - (head - ring.tail.load(std::memory_order_acquire));
      return free_bytes > 0;
    };
    auto pending = [&](std::vector<int>* out) { out->push_back(peer); };
    DIST_RETURN_IF_ERROR(waiter_->Wait(ready, pending, context));
    const uint64_t at = head % capacity;
    const uint64_t n = std::min({free_bytes, bytes, capacity - at});
    if (data != nullptr) std::memcpy(base + at, data, n);  // NULL: padding
    if (data != nullptr) data += n;
    bytes -= n;
    head += n;
    ring.head.store(head, std::memory_order_release);
    waiter_->Notify(peer);
  }
  return absl::OkStatus();
}

absl::Status PointToPoint::Read(int peer, char* data, uint64_t bytes,
                                const OpContext& context) {
  RingControl& ring = segment_->ring(peer, rank_);
  const char* base = segment_->ring_data(peer, rank_);
  const uint64_t capacity = segment_->ring_bytes();
  uint64_t tail = ring.tail.load(std::memory_order_relaxed);
  uint64_t available = 0;
  while (bytes > 0) {
    auto ready = [&]() {
      available = ring.head.load(std::memory_order_acquire) - tail;
      return available > 0;
    };
    auto pending = [&](std::vector<int>* out) { out->push_back(peer); };
    DIST_RETURN_IF_ERROR(waiter_->Wait(ready, pending, context));
    const uint64_t at = tail % capacity;
    const uint64_t n = std::min({available, bytes, capacity - at});
    if (data != nullptr) {
      std::memcpy(data, base + at, n);
      data += n;
    }
    bytes -= n;
    tail += n;
    ring.tail.store(tail, std::memory_order_release);
    waiter_->Notify(peer);
  }
  return absl::OkStatus();
}

absl::Status PointToPoint::Send(int peer, int64_t tag, const void* data, uint64_t bytes,
                                const OpContext& context) {
  MessageHeader header{tag, bytes};
  DIST_RETURN_IF_ERROR(
      Write(peer, reinterpret_cast<const char*>(&header), sizeof(header), context));
  DIST_RETURN_IF_ERROR(Write(peer, static_cast<const char*>(data), bytes, context));
  return Write(peer, nullptr, Padded(bytes) - bytes, context);
}

absl::Status PointToPoint::SizeMismatch(int peer, int64_t tag, uint64_t expected,
                                        uint64_t got) const {
  return absl::InvalidArgumentError(absl::StrCat(
      "shm: recv from rank ", peer, " with tag ", tag, " expected ", expected,
      " bytes but the matching send carried ", got,
      " bytes; send and recv must use the same count and dtype"));
}

absl::Status PointToPoint::Recv(int peer, int64_t tag, void* data, uint64_t bytes,
                                const OpContext& context) {
  std::deque<Message>& queue = unexpected_[peer];
  for (auto it = queue.begin(); it != queue.end(); ++it) {
    if (it->tag != tag) continue;
    Message message = std::move(*it);
    queue.erase(it);
    if (message.bytes.size() != bytes) {
      return SizeMismatch(peer, tag, bytes, message.bytes.size());
    }
    if (bytes > 0) std::memcpy(data, message.bytes.data(), bytes);
    return absl::OkStatus();
  }
  while (true) {
    MessageHeader header{};
    DIST_RETURN_IF_ERROR(Read(peer, reinterpret_cast<char*>(&header), sizeof(header), context));
    const uint64_t padding = Padded(header.bytes) - header.bytes;
    if (header.tag == tag) {
      const bool fits = header.bytes == bytes;
      DIST_RETURN_IF_ERROR(
          Read(peer, fits ? static_cast<char*>(data) : nullptr, header.bytes, context));
      DIST_RETURN_IF_ERROR(Read(peer, nullptr, padding, context));
      if (!fits) return SizeMismatch(peer, tag, bytes, header.bytes);
      return absl::OkStatus();
    }
    // Another tag came first: keep it for the recv that wants it.
    Message early{header.tag, std::vector<char>(header.bytes)};
    DIST_RETURN_IF_ERROR(Read(peer, early.bytes.data(), header.bytes, context));
    DIST_RETURN_IF_ERROR(Read(peer, nullptr, padding, context));
    queue.push_back(std::move(early));
  }
}

}  // namespace dist_shm

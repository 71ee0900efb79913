#include "point_to_point.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"

namespace dist_shm {
namespace {

constexpr uint64_t kHeaderBytes = sizeof(MessageHeader);
constexpr absl::Duration kCheckEvery = absl::Milliseconds(10);
constexpr absl::Duration kLivenessEvery = absl::Milliseconds(50);
// How long a by-reference message may wait at the head of its ring for its
// recv before it is read into a buffer (HoldReference). Not a timeout: past
// it the message is merely copied twice, as through the ring. Where ranks
// share CPUs, a peer is often off its CPU for milliseconds (4 ranks on 2
// CPUs, 32 MiB send/recv in a ring: 1 ms held too little, 42.7 ms a call
// against Open MPI's 5.9; 20 ms: 7.6 against 7.1). A waiting engine that
// sleeps wakes every 10 ms (waiter.cc) to see the time has passed.
constexpr absl::Duration kHoldReferenceFor = absl::Milliseconds(10);

uint64_t Padded(uint64_t bytes) { return (bytes + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes; }

// A sender starts its next message over at the ring's start once the last
// one ended at least kRestartFrom in, the next would touch a page the last
// did not, and the receiver has read far enough (StartOfMessage); only a
// message of up to 4 KiB: from 32 KiB to 128 KiB, one that always started
// at the ring's start took 1.5-2.6 times as long (2 ranks, alternated with
// the build before), where lines the peer has just read must be taken back
// from its cache.
constexpr uint64_t kRestartFrom = 4096;
constexpr uint64_t kRestartUpTo = 4096 + kHeaderBytes;

// The receiver's read position `tail`, past the sender's skip to the next
// lap if it skipped from there (RingControl::skip_from). Only where the
// ring has bytes past `tail`: the skip is published before them.
uint64_t PastSkip(const RingControl& ring, uint64_t capacity, uint64_t tail) {
  if (tail != ring.skip_from.load(std::memory_order_relaxed)) return tail;
  // A sender skips from kRestartFrom or further into a lap; skip_from's
  // first value, 0, is no skip.
  return tail % capacity == 0 ? tail : tail - tail % capacity + capacity;
}

// `n` bytes at stream position `position` of a ring of `capacity` bytes,
// which may wrap around its end.
void WriteRing(char* base, uint64_t capacity, uint64_t position, const void* from, uint64_t n) {
  if (n == 0) return;
  const uint64_t at = position % capacity;
  const uint64_t first = std::min(n, capacity - at);
  std::memcpy(base + at, from, first);
  if (first < n) std::memcpy(base, static_cast<const char*>(from) + first, n - first);
}
void ReadRing(const char* base, uint64_t capacity, uint64_t position, void* to, uint64_t n) {
  if (n == 0) return;
  const uint64_t at = position % capacity;
  const uint64_t first = std::min(n, capacity - at);
  std::memcpy(to, base + at, first);
  if (first < n) std::memcpy(static_cast<char*>(to) + first, base, n - first);
}

}  // namespace

PointToPoint::PointToPoint(Segment* segment, Waiter* waiter, int rank,
                           uint64_t single_copy_from_bytes, const PeerReader* reader)
    : segment_(segment),
      waiter_(waiter),
      rank_(rank),
      single_copy_from_bytes_(single_copy_from_bytes),
      reader_(reader),
      peers_(segment->world_size()) {}

bool PointToPoint::ByReference(int peer, uint64_t bytes) const {
  return bytes >= single_copy_from_bytes_ &&
         segment_->ring(rank_, peer).single_copy.load(std::memory_order_acquire) == kSingleCopyYes;
}

void PointToPoint::Finish(Done& done, absl::Status status) {
  --pending_;
  Done callback = std::move(done);
  callback(std::move(status));
}

absl::Status PointToPoint::SizeMismatch(int peer, int64_t tag, uint64_t expected,
                                        uint64_t got) const {
  return absl::InvalidArgumentError(
      absl::StrCat("shm: recv from rank ", peer, " with tag ", tag, " expected ", expected,
                   " bytes but the matching send carried ", got,
                   " bytes; send and recv must use the same count and dtype"));
}

bool PointToPoint::SendFitsNow(int peer, uint64_t bytes) const {
  const Peer& p = peers_[peer];
  if (!p.sends.empty()) return false;          // it would wait behind them
  if (ByReference(peer, bytes)) return false;  // done only at the receiver's ack
  const uint64_t head = p.streams.head;
  const uint64_t capacity = segment_->ring_bytes();
  auto fits = [&](uint64_t tail) {
    const uint64_t used = head - tail;
    if (used > capacity) return false;  // a tail past the head: not ours to judge
    const uint64_t room = capacity - used;
    // bytes < room first: Padded cannot overflow then.
    return bytes < room && kHeaderBytes + Padded(bytes) <= room;
  };
  if (fits(p.streams.tail_seen)) return true;
  p.streams.tail_seen = segment_->ring(rank_, peer).tail.load(std::memory_order_acquire);
  return fits(p.streams.tail_seen);
}

uint64_t PointToPoint::StartOfMessage(int peer, uint64_t head, uint64_t total) {
  // Messages that follow each other through the whole ring (1 MiB) write
  // on pages and cache lines nobody touched for a lap: on this VM the first
  // write to each page of a fresh segment costs 8 us, so a job's first
  // megabyte of small messages was 2-4 times slower than Open MPI's, whose
  // small sends reuse the same few lines. So the next message starts over
  // at the ring's start where the receiver has read that far.
  const uint64_t capacity = segment_->ring_bytes();
  const uint64_t at = head % capacity;
  if (at < kRestartFrom || total > kRestartUpTo) return head;
  // Still on the page the last message ended on: nothing to gain, and the
  // receiver's tail is a line it writes at every message (a cross-core miss).
  if ((at - 1) / kRestartFrom == (at + total - 1) / kRestartFrom) return head;
  Streams& streams = peers_[peer].streams;
  RingControl& ring = segment_->ring(rank_, peer);
  streams.tail_seen = ring.tail.load(std::memory_order_acquire);
  const uint64_t start = head - at + capacity;
  // One skip at a time: the receiver must have taken the last one first
  // (skip_from is a single word), and have read the bytes the message
  // overwrites at the ring's start.
  if (streams.tail_seen < streams.skip_until || start + total - streams.tail_seen > capacity) {
    return head;
  }
  ring.skip_from.store(head, std::memory_order_relaxed);  // published by the head's release
  streams.skip_until = start;
  return start;
}

bool PointToPoint::SendNow(int peer, int64_t tag, const void* data, uint64_t bytes) {
  if (!SendFitsNow(peer, bytes)) return false;
  char* base = segment_->ring_data(rank_, peer);
  const uint64_t capacity = segment_->ring_bytes();
  const uint64_t head =
      StartOfMessage(peer, peers_[peer].streams.head, kHeaderBytes + Padded(bytes));
  const MessageHeader header{tag, bytes};
  WriteRing(base, capacity, head, &header, kHeaderBytes);
  WriteRing(base, capacity, head + kHeaderBytes, data, bytes);
  PublishHead(peer, head + kHeaderBytes + Padded(bytes));
  waiter_->Notify(peer);
  return true;
}

PointToPoint::RecvNow PointToPoint::TryRecvNow(int peer, int64_t tag, void* data, uint64_t bytes) {
  Peer& p = peers_[peer];
  // The engine's own state for this peer comes first: a recv posted before
  // this one, a message it buffered or is in the middle of.
  if (!p.recvs.empty() || !p.early.empty() || p.incoming.in_message ||
      p.incoming.header_received != 0) {
    return RecvNow::kPost;
  }
  const uint64_t capacity = segment_->ring_bytes();
  if (bytes >= capacity || kHeaderBytes + Padded(bytes) > capacity) return RecvNow::kPost;
  RingControl& ring = segment_->ring(peer, rank_);
  const char* base = segment_->ring_data(peer, rank_);
  const uint64_t head = ring.head.load(std::memory_order_acquire);
  uint64_t tail = p.streams.tail;
  if (head - tail < kHeaderBytes) return RecvNow::kNotYet;
  tail = PastSkip(ring, capacity, tail);
  const uint64_t available = head - tail;
  if (available > capacity) return RecvNow::kPost;  // corrupt: the engine fails it
  MessageHeader header;
  ReadRing(base, capacity, tail, &header, kHeaderBytes);
  if (header.tag != tag || header.bytes != bytes) return RecvNow::kPost;
  const uint64_t total = kHeaderBytes + Padded(bytes);
  if (available < total) return RecvNow::kNotYet;  // the sender is still writing it
  ReadRing(base, capacity, tail + kHeaderBytes, data, bytes);
  PublishTail(peer, tail + total);
  waiter_->Notify(peer);
  return RecvNow::kDone;
}

void PointToPoint::PostSend(int peer, int64_t tag, const void* data, uint64_t bytes,
                            const OpContext& context, Done done) {
  ++pending_;
  Send send;
  send.tag = tag;
  send.header = MessageHeader{tag, bytes};
  send.data = static_cast<const char*>(data);
  send.bytes = bytes;
  send.context = context;
  send.done = std::move(done);
  if (bytes >= kByReference) {  // its header could not say its size
    Finish(send.done, absl::InvalidArgumentError(absl::StrCat(
                          "shm: a send of ", bytes, " bytes is too large; send at most 2^63-1")));
    return;
  }
  if (ByReference(peer, bytes)) {
    send.by_reference = true;
    send.reference =
        Reference{reinterpret_cast<uint64_t>(data), ++peers_[peer].streams.references_sent};
    send.header.bytes |= kByReference;
  }
  peers_[peer].sends.push_back(std::move(send));
  ProgressSends(peer);
}

void PointToPoint::PostRecv(int peer, int64_t tag, void* data, uint64_t bytes,
                            const OpContext& context, Done done) {
  ++pending_;
  Recv recv{tag, static_cast<char*>(data), bytes, context, std::move(done)};
  Peer& p = peers_[peer];
  for (auto it = p.early.begin(); it != p.early.end(); ++it) {
    if (it->tag != tag || it->claimed.has_value()) continue;
    if (!it->complete) {
      it->claimed = std::move(recv);  // delivered when the rest arrives
      return;
    }
    Early early = std::move(*it);
    p.early.erase(it);
    if (!early.lost.ok()) {
      Finish(recv.done, early.lost);
      return;
    }
    if (early.bytes.size() != bytes) {
      Finish(recv.done, SizeMismatch(peer, tag, bytes, early.bytes.size()));
      return;
    }
    if (bytes > 0) std::memcpy(data, early.bytes.data(), bytes);
    Finish(recv.done, absl::OkStatus());
    return;
  }
  p.recvs.push_back(std::move(recv));
  ProgressIncoming(peer);
}

bool PointToPoint::FinishTakenReferences(int peer) {
  Peer& p = peers_[peer];
  const uint64_t taken =
      segment_->ring(rank_, peer).references_taken.load(std::memory_order_acquire);
  bool finished = false;
  while (!p.awaiting.empty() && p.awaiting.front().reference.sequence <= taken) {
    Send done = std::move(p.awaiting.front());
    p.awaiting.pop_front();
    Finish(done.done, absl::OkStatus());
    finished = true;
  }
  return finished;
}

void PointToPoint::PublishHead(int peer, uint64_t head) {
  peers_[peer].streams.head = head;
  segment_->ring(rank_, peer).head.store(head, std::memory_order_release);
}

void PointToPoint::PublishTail(int peer, uint64_t tail) {
  peers_[peer].streams.tail = tail;
  segment_->ring(peer, rank_).tail.store(tail, std::memory_order_release);
}

bool PointToPoint::ProgressSends(int peer) {
  Peer& p = peers_[peer];
  const bool acked = !p.awaiting.empty() && FinishTakenReferences(peer);
  if (p.sends.empty()) return acked;
  RingControl& ring = segment_->ring(rank_, peer);
  char* base = segment_->ring_data(rank_, peer);
  const uint64_t capacity = segment_->ring_bytes();
  uint64_t head = p.streams.head;
  const uint64_t tail = ring.tail.load(std::memory_order_acquire);
  if (head - tail > capacity) return FailCorrupt(rank_, peer, head, tail);
  uint64_t free_bytes = capacity - (head - tail);
  bool moved = false;
  while (!p.sends.empty() && free_bytes > 0) {
    Send& s = p.sends.front();
    const uint64_t payload_bytes = s.payload_bytes();
    const uint64_t total = kHeaderBytes + Padded(payload_bytes);
    if (s.position == 0) {
      const uint64_t start = StartOfMessage(peer, head, total);
      if (start != head) {
        head = start;
        free_bytes = capacity - (head - p.streams.tail_seen);
      }
    }
    while (s.position < total && free_bytes > 0) {
      const uint64_t at = head % capacity;
      uint64_t n = std::min(free_bytes, capacity - at);
      if (s.position < kHeaderBytes) {
        n = std::min(n, kHeaderBytes - s.position);
        std::memcpy(base + at, reinterpret_cast<const char*>(&s.header) + s.position, n);
      } else if (s.position < kHeaderBytes + payload_bytes) {
        const uint64_t offset = s.position - kHeaderBytes;
        n = std::min(n, payload_bytes - offset);
        std::memcpy(base + at, s.payload() + offset, n);
      } else {
        n = std::min(n, total - s.position);  // padding: nothing to copy
      }
      s.position += n;
      head += n;
      free_bytes -= n;
      moved = true;
    }
    if (s.position == total) {
      Send done = std::move(s);
      p.sends.pop_front();
      // Publish before completing: the send is complete once its bytes are
      // in the ring, or, by reference, once the receiver has read them.
      PublishHead(peer, head);
      if (done.by_reference) {
        p.awaiting.push_back(std::move(done));
      } else {
        Finish(done.done, absl::OkStatus());
      }
    }
  }
  if (moved) {
    PublishHead(peer, head);
    waiter_->Notify(peer);
  }
  return moved || acked;
}

bool PointToPoint::HoldReference(Peer& p, const char* header_bytes) {
  // Read into a buffer, a large message costs an allocation (a page fault
  // per page) and a second copy. Its recv is usually on its way: a loop of
  // send/recv pairs meets the next message while it still waits for the
  // ack of its own last send. So it waits, unread, for a while; but not for
  // ever, as its sender may be blocked in a send to us that needs our engine
  // to take it (send-send-recv-recv between two ranks must not deadlock).
  MessageHeader header;
  std::memcpy(&header, header_bytes, sizeof(header));
  if ((header.bytes & kByReference) == 0) return false;
  // Our own send to this peer is not done: the peer may be waiting for it
  // to be taken before it posts this message's recv, as we wait for ours
  // (both ranks send, then receive). Take it now.
  if (!p.sends.empty() || !p.awaiting.empty()) return false;
  const absl::Time now = CoarseNow();
  if (p.held_since == absl::InfinitePast()) p.held_since = now;
  return now - p.held_since < kHoldReferenceFor;
}

void PointToPoint::TakeReference(int peer, Incoming& in) {
  Reference reference;
  std::memcpy(&reference, in.reference, sizeof(reference));
  char* dest = nullptr;
  if (in.target.has_value() && in.target->bytes == in.bytes) {
    dest = in.target->data;
  } else if (in.early != nullptr && in.early->lost.ok()) {
    dest = in.early->bytes.data();
  }
  // A sender whose communicator failed or was aborted has had (or will
  // have) its send failed, and its caller may reuse the buffer at once: what
  // is read then is not the message. Its state is published before any of
  // its operations fails (Communicator::Finish, Abort), so a read that
  // still finds it active afterwards read the message.
  const RankControl& sender = segment_->rank(peer);
  auto sender_gone = [&sender] { return sender.state.load(std::memory_order_acquire) != kActive; };
  absl::Status status;
  if (dest != nullptr && in.bytes > 0) {
    if (!sender_gone()) status = reader_->Read(peer, reference.address, dest, in.bytes);
    if (status.ok() && sender_gone()) {
      status = absl::UnavailableError(absl::StrCat(
          "shm: rank ", peer, " failed or aborted before its ", in.bytes,
          "-byte message was read from its buffer; the message is lost (the first failure says "
          "why)"));
    }
  }
  // Acked even if the read failed (the sender exited, or freed its buffer
  // early): its send is over; the recv fails, and with it the communicator.
  segment_->ring(peer, rank_).references_taken.store(reference.sequence, std::memory_order_release);
  waiter_->Notify(peer);
  if (status.ok()) return;
  if (in.target.has_value()) {
    in.failed = status;
  } else if (in.early != nullptr) {
    in.early->lost = status;
  }
}

bool PointToPoint::ProgressIncoming(int peer) {
  Peer& p = peers_[peer];
  Incoming& in = p.incoming;
  RingControl& ring = segment_->ring(peer, rank_);
  const char* base = segment_->ring_data(peer, rank_);
  const uint64_t capacity = segment_->ring_bytes();
  uint64_t tail = p.streams.tail;
  const uint64_t head = ring.head.load(std::memory_order_acquire);
  uint64_t available = head - tail;
  if (available > capacity) return FailCorrupt(peer, rank_, head, tail);
  bool moved = false;
  while (true) {
    if (in.in_message && in.received == Padded(in.ring_bytes)) {
      // The whole message is here (or, by reference, where it is).
      if (in.by_reference) TakeReference(peer, in);
      if (in.target.has_value()) {
        Recv recv = *std::move(in.target);
        in.target.reset();
        Finish(recv.done, !in.failed.ok() ? in.failed
                          : recv.bytes == in.bytes
                              ? absl::OkStatus()
                              : SizeMismatch(peer, recv.tag, recv.bytes, in.bytes));
      } else if (in.early != nullptr) {
        Early* early = in.early;
        early->complete = true;
        if (early->claimed.has_value()) {
          Recv recv = *std::move(early->claimed);
          early->claimed.reset();
          if (!early->lost.ok()) {
            Finish(recv.done, early->lost);
          } else if (recv.bytes == early->bytes.size()) {
            if (recv.bytes > 0) std::memcpy(recv.data, early->bytes.data(), recv.bytes);
            Finish(recv.done, absl::OkStatus());
          } else {
            Finish(recv.done, SizeMismatch(peer, recv.tag, recv.bytes, early->bytes.size()));
          }
          p.early.remove_if([early](const Early& e) { return &e == early; });
        }
      }
      in = Incoming();
      continue;
    }
    if (available == 0) break;
    if (!in.in_message && in.header_received == 0) {
      const uint64_t start = PastSkip(ring, capacity, tail);
      // The skip is published before the head that follows it.
      if (start - tail > available) return FailCorrupt(peer, rank_, head, start);
      available -= start - tail;
      moved |= start != tail;
      tail = start;
    }
    const uint64_t at = tail % capacity;
    uint64_t n = std::min(available, capacity - at);
    if (!in.in_message) {
      // Headers never wrap (messages are padded to their size), and a
      // sender publishes whole ones (the ring's room is a multiple of it).
      if (in.header_received == 0 && p.recvs.empty() && n >= kHeaderBytes &&
          HoldReference(p, base + at)) {
        break;
      }
      p.held_since = absl::InfinitePast();
      n = std::min(n, kHeaderBytes - in.header_received);
      std::memcpy(in.header + in.header_received, base + at, n);
      in.header_received += n;
      if (in.header_received == kHeaderBytes) {
        MessageHeader header;
        std::memcpy(&header, in.header, sizeof(header));
        in.in_message = true;
        in.by_reference = (header.bytes & kByReference) != 0;
        in.bytes = header.bytes & ~kByReference;
        in.ring_bytes = in.by_reference ? sizeof(Reference) : in.bytes;
        in.received = 0;
        auto match = std::find_if(p.recvs.begin(), p.recvs.end(),
                                  [&](const Recv& r) { return r.tag == header.tag; });
        if (match != p.recvs.end()) {
          in.target = std::move(*match);
          p.recvs.erase(match);
        } else {
          p.early.emplace_back();
          Early& early = p.early.back();
          early.tag = header.tag;
          // By reference too, once HoldReference lets it through: read
          // (TakeReference) and acked at once, so that its sender, which
          // may be blocked in that send, is not held until our recv.
          // Buffered until its recv is posted: a message larger than the
          // memory this process can have must fail that recv and leave the
          // stream in step, not throw std::bad_alloc (which terminates the
          // host on the worker thread, and on a caller's leaves the ring
          // half read).
          try {
            early.bytes.resize(in.bytes);
          } catch (const std::exception&) {
            early.lost = absl::ResourceExhaustedError(absl::StrCat(
                "shm: a message of ", in.bytes, " bytes from rank ", peer, " with tag ", header.tag,
                " arrived before its recv was posted and could not be buffered (out "
                "of memory); it was dropped. Post the recv before the send arrives, or send it "
                "in smaller pieces"));
          }
          in.early = &early;
        }
      }
    } else {
      n = std::min(n, Padded(in.ring_bytes) - in.received);
      if (in.received < in.ring_bytes) {
        const uint64_t useful = std::min(n, in.ring_bytes - in.received);
        char* dest = nullptr;
        if (in.by_reference) {
          dest = reinterpret_cast<char*>(in.reference) + in.received;
        } else if (in.target.has_value() && in.target->bytes == in.bytes) {
          dest = in.target->data + in.received;
        } else if (in.early != nullptr && in.early->lost.ok()) {
          dest = in.early->bytes.data() + in.received;
        }
        if (dest != nullptr) std::memcpy(dest, base + at, useful);
      }
      in.received += n;
    }
    tail += n;
    available -= n;
    moved = true;
  }
  if (moved) {
    PublishTail(peer, tail);
    waiter_->Notify(peer);
  }
  return moved;
}

void PointToPoint::CheckTimeouts() {
  // Deadlines come from CoarseNow (ContextFor); this runs at every poll
  // that moved nothing, where absl::Now() was a tenth of a small
  // send/recv's time.
  const absl::Time now = CoarseNow();
  if (now < next_check_) return;
  const bool liveness = now >= next_liveness_;
  next_check_ = now + kCheckEvery;
  if (liveness) next_liveness_ = now + kLivenessEvery;
  for (int peer = 0; peer < static_cast<int>(peers_.size()); ++peer) {
    Peer& p = peers_[peer];
    // The oldest operation on this peer: the first send and the first recv.
    const OpContext* oldest = nullptr;
    const char* kind = "";
    int64_t tag = 0;
    auto consider = [&](const OpContext& c, const char* k, int64_t t) {
      if (oldest == nullptr || c.deadline < oldest->deadline) {
        oldest = &c;
        kind = k;
        tag = t;
      }
    };
    if (!p.sends.empty()) consider(p.sends.front().context, "send to", p.sends.front().tag);
    if (!p.awaiting.empty()) {
      consider(p.awaiting.front().context, "send to", p.awaiting.front().tag);
    }
    if (p.incoming.target.has_value()) {
      consider(p.incoming.target->context, "recv from", p.incoming.target->tag);
    }
    for (const Recv& r : p.recvs) consider(r.context, "recv from", r.tag);
    for (const auto& e : p.early) {
      if (e.claimed.has_value()) consider(e.claimed->context, "recv from", e.claimed->tag);
    }
    if (oldest == nullptr) continue;
    absl::Status status = waiter_->CheckPeers({peer}, *oldest, liveness);
    if (status.ok() && now >= oldest->deadline) {
      status = absl::DeadlineExceededError(absl::StrCat(
          "shm: ", kind, " rank ", peer, " with tag ", tag, " on group '", waiter_->group(),
          "' timed out after ", oldest->timeout_ms, " ms at rank ", rank_, ": rank ", peer,
          " is alive but did not ", kind[0] == 's' ? "receive" : "send",
          " it; match every send with a recv of the same tag (raise the timeout if it is "
          "merely slow)"));
    }
    if (!status.ok()) {
      // A peer that sent and then left or died wrote its ring before its
      // state, so what it sent is visible now; Progress found nothing a
      // moment ago, but the message may have come since. Take it first:
      // the next check fails whatever is still pending then.
      if (ProgressIncoming(peer)) return;
      // The ring's stream is now out of step: everything pending fails.
      FailAll(status);
      return;
    }
  }
}

bool PointToPoint::FailCorrupt(int from, int to, uint64_t head, uint64_t tail) {
  FailAll(absl::DataLossError(absl::StrCat(
      "shm: the ring from rank ", from, " to rank ", to, " on group '", waiter_->group(),
      "' is corrupt (head ", head, ", read position ", tail, ", ring ", segment_->ring_bytes(),
      " bytes; the head must be at most one ring ahead): something other than dist wrote the "
      "shared segment (a stray write in a rank's process, or another process of this user); "
      "messages between ranks ",
      from, " and ", to, " are lost: destroy the communicator and create a new one")));
  return true;
}

bool PointToPoint::Progress() {
  if (pending_ == 0) return false;
  bool moved = false;
  for (int peer = 0; peer < static_cast<int>(peers_.size()); ++peer) {
    if (peer == rank_) continue;
    moved |= ProgressSends(peer);
    moved |= ProgressIncoming(peer);
  }
  if (!moved && pending_ > 0) CheckTimeouts();
  return moved;
}

void PointToPoint::FailAll(const absl::Status& status) {
  for (Peer& p : peers_) {
    for (Send& s : p.sends) Finish(s.done, status);
    for (Send& s : p.awaiting) Finish(s.done, status);
    for (Recv& r : p.recvs) Finish(r.done, status);
    if (p.incoming.target.has_value()) Finish(p.incoming.target->done, status);
    for (Early& e : p.early) {
      if (e.claimed.has_value()) Finish(e.claimed->done, status);
    }
    const Streams streams = p.streams;  // the rings' state, not an operation's
    p = Peer();
    p.streams = streams;
  }
}

}  // namespace dist_shm

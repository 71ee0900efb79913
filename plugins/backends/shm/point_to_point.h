// send/recv over one single-producer single-consumer byte ring per ordered
// pair of ranks, driven by a non-blocking progress engine.
//
// Posting a send or recv never blocks the worker: Progress() moves whatever
// bytes the rings allow, for every pending operation, and the worker calls it
// while idle and while it waits inside collectives. So send-then-recv rings
// of any message size cannot deadlock on the bounded rings. A recv matches
// the first message from its peer with its tag; messages with other tags
// that arrive first are buffered locally, so tags may be received in any
// order.
//
// A message of at least `single_copy_from_bytes`, to a peer that can read
// this process's memory (single_copy.h), goes by reference: the ring
// carries its address, the receiver reads it straight from the sender's
// buffer and acks, and the send completes at the ack. Everything else, and
// everything when the receiver cannot read us, is copied through the ring.
#ifndef DIST_PLUGINS_BACKENDS_SHM_POINT_TO_POINT_H_
#define DIST_PLUGINS_BACKENDS_SHM_POINT_TO_POINT_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "layout.h"
#include "segment.h"
#include "single_copy.h"
#include "waiter.h"

namespace dist_shm {

class PointToPoint {
 public:
  using Done = std::function<void(absl::Status)>;

  // single_copy_from_bytes: the smallest message sent by reference where
  // the receiver can read us; UINT64_MAX: none.
  // reader: this rank's reads of its peers' memory; outlives this.
  PointToPoint(Segment* segment, Waiter* waiter, int rank, uint64_t single_copy_from_bytes,
               const PeerReader* reader);

  // Start an operation; `done` runs (on the worker) when it finishes.
  void PostSend(int peer, int64_t tag, const void* data, uint64_t bytes, const OpContext& context,
                Done done);
  void PostRecv(int peer, int64_t tag, void* data, uint64_t bytes, const OpContext& context,
                Done done);

  // Whether a send of `bytes` to `peer` posted now would be done at once:
  // no send to that peer waits, it does not go by reference, and the ring
  // has room for all of it.
  bool SendFitsNow(int peer, uint64_t bytes) const;

  // The fast path of the thread that runs send/recv (Communicator::SendNow
  // and ReceiveNow): whole messages straight between the user's buffers and
  // the rings, with no operation record, callback or pending count. Anything
  // out of the ordinary is left to PostSend/PostRecv, which handle every case.
  //
  // Writes the whole message into the ring to `peer` if SendFitsNow (no
  // send to `peer` pending, room for all of it); returns whether it did
  // (the send is then complete).
  bool SendNow(int peer, int64_t tag, const void* data, uint64_t bytes);
  enum class RecvNow {
    kDone,    // the message was there, and is in `data`
    kNotYet,  // nothing from `peer` has fully arrived yet; poll again
    kPost,    // not for this path (another tag or size first, a message
              // bigger than the ring, a recv from `peer` posted before, a
              // message the engine holds or is in the middle of): PostRecv it
  };
  // Takes the next message from `peer` if it is complete in the ring and
  // carries `tag` and `bytes`; consumes nothing otherwise.
  RecvNow TryRecvNow(int peer, int64_t tag, void* data, uint64_t bytes);
  // Moves every byte the rings allow, completes what is finished, fails
  // what timed out or whose peer failed. Returns true if anything moved.
  bool Progress();
  // Fails everything pending with `status` (abort).
  void FailAll(const absl::Status& status);
  bool idle() const { return pending_ == 0; }

 private:
  struct Send {
    int64_t tag;
    MessageHeader header;
    const char* data;
    uint64_t bytes;
    uint64_t position = 0;  // of header + payload + padding
    OpContext context;
    Done done;
    bool by_reference = false;
    Reference reference{};  // the ring's payload when by_reference
    // What goes into the ring after the header.
    const char* payload() const {
      return by_reference ? reinterpret_cast<const char*>(&reference) : data;
    }
    uint64_t payload_bytes() const { return by_reference ? sizeof(Reference) : bytes; }
  };
  struct Recv {
    int64_t tag;
    char* data;
    uint64_t bytes;
    OpContext context;
    Done done;
  };
  // A message that arrived before its recv was posted.
  struct Early {
    int64_t tag;
    std::vector<char> bytes;
    uint64_t received = 0;
    bool complete = false;
    std::optional<Recv> claimed;  // a recv waiting for the rest of it
    // Not OK when no memory could be had to buffer the message: its bytes
    // are read off the ring and dropped, and its recv fails with this.
    absl::Status lost;
  };
  // What the ring from one peer is in the middle of.
  struct Incoming {
    unsigned char header[sizeof(MessageHeader)];
    uint64_t header_received = 0;
    bool in_message = false;
    bool by_reference = false;
    uint64_t bytes = 0;       // the message's size
    uint64_t ring_bytes = 0;  // its payload in the ring: bytes, or a Reference
    uint64_t received = 0;    // ring payload + padding consumed
    unsigned char reference[sizeof(Reference)];
    absl::Status failed;         // the single-copy read of target's data failed
    std::optional<Recv> target;  // posted recv being filled, or
    Early* early = nullptr;      // early message being filled
  };
  // The state of the two rings with one peer, which outlives every
  // operation (FailAll keeps it).
  struct Streams {
    // Our ring to this peer's head (bytes written) and this peer's ring to
    // us's tail (bytes read), as we last stored them: only we write them,
    // and reading the head back from the segment was the costliest load of
    // a small send (the receiver polls its line: 8 B sendrecv on 2 ranks,
    // 0.87-0.91 -> 0.61-0.62 us). Set with PublishHead and PublishTail.
    uint64_t head = 0;
    uint64_t tail = 0;
    // The receiver's tail of our ring to this peer as last read: it only
    // grows, so room that it already shows needs no new read of a line the
    // receiver writes at every message (a cross-core miss each time).
    mutable uint64_t tail_seen = 0;
    // Where the last skip to the ring's start landed (StartOfMessage): the
    // next may come once the receiver's tail has reached it.
    uint64_t skip_until = 0;
    uint64_t references_sent = 0;  // by-reference sends' sequence numbers
  };
  struct Peer {
    Streams streams;
    std::deque<Send> sends;
    std::deque<Send> awaiting;  // by reference, in the ring, not yet acked
    // Since when a by-reference message at the head of the ring from this
    // peer has waited for its recv (HoldReference).
    absl::Time held_since = absl::InfinitePast();
    std::deque<Recv> recvs;  // posted, unmatched, in order (usually 0-1); by value: no allocation
    std::list<Early> early;
    Incoming incoming;
  };

  bool ByReference(int peer, uint64_t bytes) const;
  // The ring position where the sender's next message, `total` ring bytes,
  // starts: `head`, or the start of the ring's next lap (see the .cc).
  uint64_t StartOfMessage(int peer, uint64_t head, uint64_t total);
  // Publish our ring to `peer`'s new head, or its ring to us's new tail,
  // and keep our copy of it (Streams).
  void PublishHead(int peer, uint64_t head);
  void PublishTail(int peer, uint64_t tail);
  bool ProgressSends(int peer);
  bool FinishTakenReferences(int peer);
  void TakeReference(int peer, Incoming& in);
  bool HoldReference(Peer& p, const char* header);
  bool ProgressIncoming(int peer);
  // Fails everything pending (the communicator with it): the ring from
  // `from` to `to` holds a head and tail that no sender and receiver in
  // step could have written. Returns true (something happened).
  bool FailCorrupt(int from, int to, uint64_t head, uint64_t tail);
  void Deliver(Recv& recv, const char* data, uint64_t bytes);
  void Finish(Done& done, absl::Status status);
  absl::Status SizeMismatch(int peer, int64_t tag, uint64_t expected, uint64_t got) const;
  void CheckTimeouts();

  Segment* segment_;
  Waiter* waiter_;
  int rank_;
  uint64_t single_copy_from_bytes_;
  const PeerReader* reader_;
  std::vector<Peer> peers_;
  int pending_ = 0;  // posted operations not finished
  absl::Time next_check_ = absl::InfinitePast();
  absl::Time next_liveness_ = absl::InfinitePast();
};

}  // namespace dist_shm

#endif  // DIST_PLUGINS_BACKENDS_SHM_POINT_TO_POINT_H_

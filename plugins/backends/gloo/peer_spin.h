// Polling a peer's socket for a few microseconds before Gloo's blocking
// read on a synchronous pair.
//
// Why: on the synchronous pairs (sync_mesh.h) a rank that waits for a
// message sleeps in read(), and the peer's write has to wake it. On this
// project's virtual machines that wake-up (an interrupt to the other CPU)
// is most of a small message's latency: raw Gloo's own busy-polling mode
// took 8.6 µs for a 2-rank barrier where the sleeping read took 15 µs
// (2026-12-03, README.md, "Waiting awake"). A rank that polls the socket
// for a moment first is awake when the message lands. Gloo's busy-polling
// mode polls until the message comes, however long; this polls for at
// most `budget` and then sleeps in Gloo's read as before, so a rank
// waiting long for a slow peer does not burn its CPU.
//
// Only where each rank of the group on this host has a CPU of its own
// (ranks whose pair ends on this host, plus this one, at most the job's
// CPUs: dist::JobCpus in dist/cpp/job_cpus.hpp, the rule shm follows too):
// otherwise a polling rank takes the CPU from the very rank it waits for.
// And adaptive, as shm's waits are: a poll that found nothing halves the
// next one (down to a sixteenth of the budget), one that found its message
// doubles it (up to the budget). A host whose other threads keep the CPUs
// busy, or a peer that is often late, so costs a few microseconds a wait,
// not the whole budget (in a Python process that also ran torch's threads,
// a fixed 50 µs made some 2-rank operations take 62-80 µs against 19-40 µs
// sleeping).
//
// Not thread-safe: one operation at a time uses it, as the communicator
// runs them.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_PEER_SPIN_H_
#define DIST_PLUGINS_BACKENDS_GLOO_PEER_SPIN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "gloo/transport/buffer.h"
#include "gloo/transport/pair.h"

namespace dist_gloo {

class PeerSpin {
 public:
  PeerSpin() = default;  // never polls

  // `sockets[r]`: a descriptor of the socket to rank r (borrowed: it stays
  // open while this object is used; -1 for none). Polls up to `budget`
  // before each wait where ranks on this host fit its CPUs, else never.
  PeerSpin(std::vector<int> sockets, absl::Duration budget);

  // Returns once rank `peer`'s socket has something to read (or has
  // closed), or the budget has passed; the caller then reads as before.
  // Returns true when `message_bytes` (the payload of the message awaited)
  // is above one segment and its first piece is there: the caller should
  // then read it in an AwakeRead, since Gloo's read would otherwise sleep
  // again between the pieces.
  bool AwaitData(int peer, size_t message_bytes = 0);

  bool polls() const { return budget_ns_ > 0; }
  // The descriptor of rank `peer`'s socket (borrowed), or -1.
  int socket(int peer) const {
    return peer >= 0 && static_cast<size_t>(peer) < sockets_.size() ? sockets_[peer] : -1;
  }

 private:
  std::vector<int> sockets_;
  int64_t budget_ns_ = 0;  // the most a poll lasts; 0: never polls
  int64_t now_ns_ = 0;     // what the next one lasts (see above)
};

// Gloo's busy-polling read on the synchronous `pair` (borrowed, may be
// null: nothing) for the life of this object, for a message whose first
// piece is there (AwaitData returned true).
//
// Why: Gloo's read loops until the message is whole; sleeping, each piece
// after the first wakes it again. Busy-polling, it copies each piece out
// as it lands, while the sender still writes the next: the receiver's copy
// overlaps the transfer. (An earlier build waited for the whole message
// before reading, which serialized the two: 2-rank broadcast 128 KiB
// 35-49 us, 27-30 this way; busy-polling raw Gloo 24-26.) The spin is
// bounded as any read of the pair is: by the pair's timeout (Gloo checks it
// while it polls), by the peer closing, or by an abort, which shuts the
// socket down. A peer stopped halfway through writing one message is the
// one case where it spins for long. setSync(true, ...) on a pair already
// synchronous only sets the flag, under the pair's lock (public Gloo API).
class AwakeRead {
 public:
  explicit AwakeRead(gloo::transport::Pair* pair);
  ~AwakeRead();
  AwakeRead(const AwakeRead&) = delete;
  AwakeRead& operator=(const AwakeRead&) = delete;

 private:
  gloo::transport::Pair* const pair_;
};

// Receives rank `peer`'s next message (`bytes` of payload) into `recv`, a
// buffer on `pair`, the pair to `peer`: polls with `spin` first (null:
// never), and reads a large message busy-polling once its first piece is
// there (AwakeRead). Every read of the plugin's own classes goes through
// here.
void ReceiveFrom(PeerSpin* spin, int peer, size_t bytes, gloo::transport::Pair& pair,
                 gloo::transport::Buffer& recv);

// Whether the TCP socket `fd` is connected to a peer on this host: a
// loopback address, or the peer's address is the socket's own.
bool BothEndsOnThisHost(int fd);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_PEER_SPIN_H_

// How large a message may travel on Gloo's synchronous pairs, as every rank
// of a context agrees.
//
// Why a limit: a synchronous write returns only once the kernel has taken
// all of it, and a rank reads a pair only while it waits on that pair. Two
// ranks that write to each other at once (AllreduceRing on two ranks,
// AllreduceHalvingDoubling's exchanges) both block once the bytes in flight
// between them outgrow what the kernel holds for the connection, at least
// the sender's send buffer, and neither reads: stuck until the pair's
// timeout, then an error. A link holds at most two messages that matter
// here (one the peer has not read yet, one being written; each at most the
// operation's whole buffer, an all_gather's block). So the limit is a
// quarter of the smallest send buffer as the kernel reports it (twice what
// it granted), rounded down to a power of two: the two messages fill at
// most half of it, the rest is for the kernel's per-packet bookkeeping.
//
// What that gives (the pairs ask for 4 MiB, EnlargeSendBuffers): 64 KiB on
// a default Linux (net.core.wmem_max 208 KiB, so the buffer is 416 KiB);
// the cap, kMaxSyncMessageBytes, where wmem_max is 4 MiB or more (this VM).
// Above the cap all_reduce leaves the bound classes anyway (algorithm.cc),
// and the few larger broadcasts and all_gathers they run (up to 4 MiB) go
// on the asynchronous pairs.
//
// Why agreed: each rank puts an operation on the synchronous pairs or not
// by its size, so all must use the same limit, and hosts differ in
// wmem_max. One all_reduce(min) of a single number over the new pairs
// settles it.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_SYNC_LIMIT_H_
#define DIST_PLUGINS_BACKENDS_GLOO_SYNC_LIMIT_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "gloo/context.h"

namespace dist_gloo {

// No message above this travels on synchronous pairs, whatever the buffers.
// An operation this small is also what connects them (the first one).
constexpr size_t kMaxSyncMessageBytes = size_t{1} << 20;

// The limit for a send buffer of `smallest_send_buffer` bytes as the kernel
// reports it (0: unknown, and then nothing but empty messages may go).
size_t SyncMessageLimit(int64_t smallest_send_buffer);

// Enlarges every pair's send buffer of `context` (connected, its pairs
// already synchronous) to `send_buffer_bytes`, then agrees with every rank
// on the limit: the smallest of every rank's SyncMessageLimit and
// `max_message_bytes` (what the rank allows: gloo.sync_max_bytes). A
// collective over `context` that every rank must call once, right after
// connecting it. Throws Gloo's exceptions.
size_t AgreeSyncMessageLimit(const std::shared_ptr<gloo::Context>& context, int send_buffer_bytes,
                             size_t max_message_bytes = kMaxSyncMessageBytes);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_SYNC_LIMIT_H_

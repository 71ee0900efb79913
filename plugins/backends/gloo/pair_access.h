// What the plugin needs of Gloo's pairs and contexts beyond its algorithms:
//   - the peer's socket address as Gloo prints it in its error messages
//     ("Connection closed by peer [127.0.0.1]:41234"), so that an error can
//     name the peer RANK instead of an ephemeral port;
//   - failing every pending operation on the pair, so that comm_abort can
//     unblock an operation that is waiting on a silent peer right away
//     (Context::closeConnections does not wake waiters in this Gloo);
//   - adopting pairs connected by full_mesh.cc, choosing slots, the pair's
//     socket and send buffer, and the transport's timeout.
// Gloo 0.5 keeps these protected; the pinned Gloo (third_party/gloo) makes
// them public methods with a small patch (0002-public-hooks.patch), so all of
// this goes through Gloo's public interface. Calls never throw.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_PAIR_ACCESS_H_
#define DIST_PLUGINS_BACKENDS_GLOO_PAIR_ACCESS_H_

#include <chrono>
#include <memory>
#include <string>

#include "gloo/context.h"
#include "gloo/transport/context.h"
#include "gloo/transport/device.h"

namespace dist_gloo {

// The address of `rank`'s end of the connection as Gloo formats it, or ""
// when the pair is not a TCP pair.
std::string PeerAddress(gloo::Context& context, int rank);

// Fails every pending and future operation on every pair of `context` with
// `reason` and closes the connections. Never throws.
void FailAllPairs(gloo::Context& context, const std::string& reason);

// Makes the next Context::nextSlot() return `slot`. Gloo's legacy algorithm
// classes take their slots from that counter when constructed; the plugin
// builds them at slots it derives from the operation (bound_algorithms.cc).
void SetNextSlot(gloo::Context& context, int slot);

// FailAllPairs on a transport context not yet given to a gloo::Context
// (wakes threads blocked connecting its pairs). Never throws.
void FailTransportPairs(gloo::transport::Context& transport, int rank, int size,
                        const std::string& reason);

// Gives `context` its connected transport context and device, as Gloo's
// connectFullMesh does at its end (full_mesh.cc connects the pairs itself).
void AdoptTransport(gloo::Context& context, std::shared_ptr<gloo::transport::Context> transport,
                    std::shared_ptr<gloo::transport::Device> device);

// A descriptor of its own (close-on-exec) for the socket of `rank`'s pair,
// or -1. Shutting it down wakes a thread blocked reading the pair in Gloo's
// synchronous mode, which holds the pair's lock while it reads, so
// FailAllPairs alone would wait for that read to time out (sync_mesh.h).
// The duplicate stays valid after Gloo closes its own descriptor, so it can
// never reach a socket that later reuses Gloo's number.
int DuplicatePairSocket(gloo::Context& context, int rank);

// Gives every pair's socket a send buffer of `bytes` (SO_SNDBUF; the
// kernel caps it at 2 x net.core.wmem_max) and tells the pair, so that Gloo
// does not size it down to its first message. Why: Gloo sizes the buffer
// to the message it sends, so a message waits in the kernel for the
// peer's acknowledgement of the one before, which the peer delays by up to
// 40 ms once the connection looks interactive (Linux's delayed ACK after
// small request-reply traffic). 64 KiB broadcasts and all_gathers on 4
// ranks took 40-135 ms a call here after smaller ones (README.md, "Send
// buffers"). Call right after connecting, before any operation. Best
// effort; never throws. Returns the smallest buffer a pair got, as the
// kernel reports it (SO_SNDBUF: twice what it granted, for its own
// bookkeeping), or 0 where a pair's could not be set or read.
int EnlargeSendBuffers(gloo::Context& context, int bytes);

// What the plugin asks for every pair (the kernel caps it at
// net.core.wmem_max: 208 KiB on a default Linux).
constexpr int kPairSendBufferBytes = 4 << 20;

// Sets the timeout the transport uses for waits that pass none (Gloo's
// ring allreduce, among others). Never throws.
void SetTransportTimeout(gloo::Context& context, std::chrono::milliseconds timeout);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_PAIR_ACCESS_H_

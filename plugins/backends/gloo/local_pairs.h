// Connections between two ranks on the same host: which they are, and
// keeping the kernel from pacing them.
//
// Why: such a connection crosses no network, so congestion control has
// nothing to control on it, yet it can still cost. BBR, the default
// congestion control of many cloud hosts (this project's machines among
// them), paces every connection at its own estimate of the path's
// bandwidth; the loopback device has no queueing discipline, so TCP paces
// in the kernel itself, and the estimate follows what the connection has
// carried so far. Here (2026-12-03, 2 and 4 ranks on one host) that made
// the same 128 KiB-1 MiB broadcast take one or two times as long from one
// run to the next, and the plugin's large operations 1.2-2.3x slower than
// with reno, which never paces (README.md, "Connections on one host").
// Reno may always be chosen without privileges (Linux keeps it in
// net.ipv4.tcp_allowed_congestion_control).
//
// Only pacing congestion controls (BBR's family) are replaced; a host
// whose connections use cubic or anything else keeps it.
#ifndef DIST_PLUGINS_BACKENDS_GLOO_LOCAL_PAIRS_H_
#define DIST_PLUGINS_BACKENDS_GLOO_LOCAL_PAIRS_H_

#include <vector>

#include "gloo/context.h"

namespace dist_gloo {

// Whether the TCP socket `fd` is connected to a peer on this host: the
// peer's address is a loopback one or the socket's own (the kernel routes
// that over the loopback device too). Both ends of a connection answer
// alike, so ranks may base a protocol choice on it.
bool BothEndsOnThisHost(int fd);

// Switches the connected TCP socket `fd` from a pacing congestion control
// (bbr and its kin) to reno. True if it did; any other socket is left as
// it is. Never fails loudly: a socket it cannot read or change stays.
bool StopPacing(int fd);

// Which ranks' pairs in `context` connect to this host (indexed by rank;
// false for this rank and for pairs that are not TCP). Never throws.
std::vector<bool> PeersOnThisHost(gloo::Context& context);

// StopPacing on the pair of every peer on this host; returns how many
// pairs changed. Call right after connecting. Never throws.
int StopPacingOnThisHost(gloo::Context& context);

}  // namespace dist_gloo

#endif  // DIST_PLUGINS_BACKENDS_GLOO_LOCAL_PAIRS_H_

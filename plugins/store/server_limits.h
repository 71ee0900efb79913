// The bounds of the TCP store server (plugins/store/README.md, "TCP server
// limits"), and how they are set by name: from dist_store_server's flags
// and from the options "store.<name>" that tcp:// and env:// hand to the
// server rank 0 hosts.
#ifndef DIST_PLUGINS_STORE_SERVER_LIMITS_H_
#define DIST_PLUGINS_STORE_SERVER_LIMITS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dist::store {

// Every bound of the server. The defaults serve a job of 8,192 ranks with
// room to spare; each is a flag of dist_store_server and, for the server
// rank 0 hosts, an option "store.<name>" (SetLimit below).
struct TcpStoreServerLimits {
  // Connections that have not proved the token yet. When full, the oldest
  // is dropped for the newcomer, so idle strangers cannot lock ranks out.
  int max_pending_connections = 16384;
  // Authenticated connections (a rank holds one, plus one per thread
  // blocked in a get). When full, a newcomer evicts the least recently
  // active idle one (nothing parked, buffered, unsent or unread; the
  // client reconnects transparently), so logged-in strangers on a store
  // without a token cannot lock ranks out; with none idle it is refused.
  int max_connections = 65536;
  // A connection that has not completed the handshake by then is dropped.
  absl::Duration handshake_timeout = absl::Seconds(5);
  // A request must arrive whole within this time of its first byte, and a
  // reply must be taken by the client within it (slow readers and writers).
  absl::Duration stall_timeout = absl::Seconds(10);
  // The largest request. A larger one (up to the protocol's 2 x 64 MiB) is
  // skipped unread and answered with RESOURCE_EXHAUSTED naming this option.
  size_t max_request_bytes = 16 * 1024 * 1024;
  // Keys in one check/wait.
  size_t max_keys_per_request = 65536;
  // All bytes held for clients together: partial requests, parked
  // requests' keys and unsent replies. Past it the server reads from no one
  // until it drains.
  size_t max_buffered_bytes = 32 * 1024 * 1024;
  // Keys plus values stored; a set beyond it is RESOURCE_EXHAUSTED.
  size_t max_store_bytes = size_t{1} << 30;
  // Refusals and drops logged per 10 s; the rest are counted in one line.
  int max_log_lines = 10;
  // File descriptors the server leaves free for the process that hosts it
  // (rank 0's own sockets and files: Gloo needs up to 4 per peer while it
  // connects). The server never keeps a connection on a descriptor numbered
  // at or above the open-files limit minus this: a newcomer that lands
  // there makes room (see TcpStoreServer) or is refused. -1: a quarter of
  // the limit, at least 64.
  int fd_reserve = -1;
};

// Sets the limit called `name` (a field name above) from `value`: a whole
// number, or for the two timeouts seconds ("5") or a duration ("500ms").
// Errors name the limit, the value and the accepted form.
absl::Status SetLimit(TcpStoreServerLimits* limits, absl::string_view name,
                      absl::string_view value);

// The ranges every server checks before it listens: connections and keys at
// least 1, timeouts positive, max_request_bytes at least 1 KiB and
// max_buffered_bytes at least 64 KiB, so that a rank's own requests fit.
absl::Status CheckLimits(const TcpStoreServerLimits& limits);

// The descriptors `limits` leave free below an open-files limit of
// `open_files_limit` (fd_reserve, or its default).
int64_t FdReserve(const TcpStoreServerLimits& limits, int64_t open_files_limit);

}  // namespace dist::store

#endif  // DIST_PLUGINS_STORE_SERVER_LIMITS_H_

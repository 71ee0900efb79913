// How the ranks of mpi:// learn the store's address: rank 0 hosts the TCP
// store on a port the kernel picks and broadcasts "ok HOST PORT" over
// MPI_COMM_WORLD, or "error WHY" when it cannot, so that the other ranks
// fail with rank 0's reason instead of at the deadline.
#ifndef DIST_PLUGINS_RENDEZVOUS_MPI_STORE_ANNOUNCEMENT_H_
#define DIST_PLUGINS_RENDEZVOUS_MPI_STORE_ANNOUNCEMENT_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dist/rendezvous_plugin.h"
#include "dist/store.h"
#include "plugins/rendezvous/common/tcp_rendezvous.h"

namespace dist::rendezvous {

// Rank 0 of `world_size`: sets the store's address in `config` (loopback
// when every rank is on `one_host`), opens the store with the limits of
// `hints` and announces it, or announces why it could not.
absl::StatusOr<dist_store_t*> HostAndAnnounce(TcpRendezvousConfig config, bool one_host,
                                              int world_size, const dist_rendezvous_hints_t* hints,
                                              int64_t timeout_ms, absl::Time deadline);

// Every other rank: waits for rank 0's announcement until `deadline`, then
// connects to the store it names.
absl::StatusOr<dist_store_t*> JoinAnnounced(TcpRendezvousConfig config, int rank, int world_size,
                                            int64_t timeout_ms, absl::Time deadline);

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_MPI_STORE_ANNOUNCEMENT_H_

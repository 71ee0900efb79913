// The address rank 0 of a multi-host mpi:// job announces for its store when
// MASTER_ADDR is not set.
#ifndef DIST_PLUGINS_RENDEZVOUS_MPI_REACHABLE_ADDRESS_H_
#define DIST_PLUGINS_RENDEZVOUS_MPI_REACHABLE_ADDRESS_H_

#include <string>

namespace dist::rendezvous {

// An IPv4 address of this host that other hosts can reach: the first
// interface that is up and not loopback. Empty when there is none.
std::string ReachableAddress();

}  // namespace dist::rendezvous

#endif  // DIST_PLUGINS_RENDEZVOUS_MPI_REACHABLE_ADDRESS_H_

// Finding which ranks have not reached a collective, through the store.
//
// MPI cannot say who is missing from a collective that never completes. When
// an operation times out, each rank that is stuck in it writes a key under
// `prefix`; after a short grace period the ranks without a key are the ones
// that never reached the operation.
#ifndef DIST_PLUGINS_BACKENDS_MPI_MISSING_RANKS_H_
#define DIST_PLUGINS_BACKENDS_MPI_MISSING_RANKS_H_

#include <string>

#include "absl/time/time.h"
#include "dist/store.h"

namespace dist_mpi {

// Returns a phrase for an error message, e.g. "ranks 2, 3 have not reached
// it" or "every rank is waiting in it". `store` may be null.
std::string DescribeMissingRanks(dist_store_t* store, const std::string& prefix, int rank, int size,
                                 absl::Duration grace);

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_MISSING_RANKS_H_

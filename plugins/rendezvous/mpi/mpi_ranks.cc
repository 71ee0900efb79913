#include "plugins/rendezvous/mpi/mpi_ranks.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dist/cpp/status.hpp"
#include "plugins/rendezvous/mpi/mpi_world.h"

namespace dist::rendezvous {

absl::StatusOr<RankInfo> MpiRanks(const Url& url, const Query& query,
                                  const dist_rendezvous_hints_t* hints) {
  DIST_RETURN_IF_ERROR(mpi::EnsureMpi());
  absl::StatusOr<mpi::WorldPlace> world = mpi::World();
  if (!world.ok()) return world.status();
  const int32_t hint_rank = hints != nullptr ? hints->rank : -1;
  const int32_t hint_size = hints != nullptr ? hints->world_size : -1;
  if ((hint_rank >= 0 && hint_rank != world->rank) || (hint_size > 0 && hint_size != world->size)) {
    return absl::InvalidArgumentError(
        absl::StrCat(url.text, ": the caller says rank ", hint_rank, " of ", hint_size,
                     " but MPI_COMM_WORLD says rank ", world->rank, " of ", world->size,
                     "; leave rank and world size unset with mpi://, or use env:// or tcp://"));
  }
  // Local rank and size from the launcher's variables; rank and size from MPI.
  dist_rendezvous_hints_t mpi_hints{};
  mpi_hints.struct_size = sizeof(mpi_hints);
  mpi_hints.rank = world->rank;
  mpi_hints.world_size = world->size;
  return ResolveRanks(url, query, &mpi_hints);
}

}  // namespace dist::rendezvous

// all_gather as a ring of MPI_Isend/MPI_Irecv steps (the bandwidth-optimal
// schedule: every rank sends and receives (W-1) blocks, one per step).
//
// Why not MPI_Iallgather: Open MPI 4.1's libnbc (linear and recursive
// doubling alike) first copies this rank's block into the receive buffer
// inside MPI_Iallgather and then sends it from there. With shared memory the
// peer reads that block straight out of this process (CMA), so every call
// rewrites memory the peer has just read, and that copy runs at a fraction
// of memcpy speed (measured 33 us instead of 12 us for 512 KiB on a quiet
// machine, 180-600 us in the slow runs on this VM): 1.4-5x the time of
// MPI_Allgather at 256 KiB-4 MiB per rank on 2 ranks (bench/
// allgather_copy_bench shows it with raw MPI). The blocking MPI_Allgather
// (coll/tuned) sends from the send buffer and copies the local block while
// the transfer runs; this schedule does the same.
//
// Step s (0 <= s < W-1): receive block (rank-s-1) mod W from the left
// neighbour and send block (rank-s) mod W to the right one; step 0 sends
// straight from the send buffer. A step is posted once the previous one
// completed.
#ifndef DIST_PLUGINS_BACKENDS_MPI_RING_ALL_GATHER_H_
#define DIST_PLUGINS_BACKENDS_MPI_RING_ALL_GATHER_H_

#include <mpi.h>

#include <cstddef>

#include "p2p_schedule.h"

namespace dist_mpi {

class RingAllGather : public P2pSchedule {
 public:
  // `send` holds this rank's `count` elements; it may be this rank's block
  // of `recv` (in place). `block_bytes` = count * the type's size.
  RingAllGather(const void* send, void* recv, int count, MPI_Datatype type, size_t block_bytes,
                int rank, int size, MPI_Comm comm);

  int Start(int tag) override;
  int Test(bool* done) override;

 private:
  char* Block(int index) const;
  int PostStep();

  const void* const send_;
  char* const recv_;
  const int count_;
  const MPI_Datatype type_;
  const size_t block_bytes_;
  const int rank_;
  const int size_;
  const MPI_Comm comm_;
  int tag_ = 0;
  int step_ = 0;  // the step in flight; size_ - 1 once done
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_RING_ALL_GATHER_H_

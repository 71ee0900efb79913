// Small all_reduce on a power-of-two number of ranks as recursive doubling
// of MPI_Isend/MPI_Irecv steps (log2(W) exchanges of the whole buffer).
//
// Why not MPI_Iallreduce: libnbc builds a schedule (allocations, rounds) on
// every call, which at 8 B cost about 1 us on top of the 0.5 us of a raw
// MPI_Allreduce here (issue 15); two point-to-point messages per step cost
// far less. Used below kMaxBytes (ops.cc); larger messages keep libnbc's
// ring (nbc_tuning.h), which moves less data per rank.
//
// Step k: exchange the partial result with rank ^ 2^k and reduce the two in
// rank order (lower rank's operand first), so every rank computes the same
// expression tree and gets bit-identical results, also for floats.
#ifndef DIST_PLUGINS_BACKENDS_MPI_RECURSIVE_DOUBLING_ALL_REDUCE_H_
#define DIST_PLUGINS_BACKENDS_MPI_RECURSIVE_DOUBLING_ALL_REDUCE_H_

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "p2p_schedule.h"

namespace dist_mpi {

class RecursiveDoublingAllReduce : public P2pSchedule {
 public:
  static constexpr size_t kMaxBytes = 8 << 10;

  // Whether this schedule serves an all_reduce of `bytes` over `size` ranks.
  static bool Serves(size_t bytes, int size) {
    return bytes <= kMaxBytes && size > 1 && (size & (size - 1)) == 0;
  }

  // `send` may equal `recv` (in place); `bytes` = count * the type's size.
  RecursiveDoublingAllReduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                             size_t bytes, int rank, int size, MPI_Comm comm);

  int Start(int tag) override;
  int Test(bool* done) override;

 private:
  int PostStep();

  const void* const send_;
  char* const recv_;
  const int count_;
  const MPI_Datatype type_;
  const MPI_Op op_;
  const size_t bytes_;
  const int rank_;
  const int size_;
  const MPI_Comm comm_;
  std::vector<char> incoming_;
  int tag_ = 0;
  int mask_ = 1;  // the step in flight is the exchange with rank ^ mask_
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

}  // namespace dist_mpi

#endif  // DIST_PLUGINS_BACKENDS_MPI_RECURSIVE_DOUBLING_ALL_REDUCE_H_

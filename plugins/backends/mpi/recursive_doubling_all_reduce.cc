#include "recursive_doubling_all_reduce.h"

#include <cstring>

namespace dist_mpi {

RecursiveDoublingAllReduce::RecursiveDoublingAllReduce(const void* send, void* recv, int count,
                                                       MPI_Datatype type, MPI_Op op, size_t bytes,
                                                       int rank, int size, MPI_Comm comm)
    : send_(send),
      recv_(static_cast<char*>(recv)),
      count_(count),
      type_(type),
      op_(op),
      bytes_(bytes),
      rank_(rank),
      size_(size),
      comm_(comm),
      incoming_(bytes) {}

int RecursiveDoublingAllReduce::PostStep() {
  const int partner = rank_ ^ mask_;
  int rc = MPI_Irecv(incoming_.data(), count_, type_, partner, tag_, comm_, &requests_[0]);
  if (rc != MPI_SUCCESS) return rc;
  return MPI_Isend(recv_, count_, type_, partner, tag_, comm_, &requests_[1]);
}

int RecursiveDoublingAllReduce::Start(int tag) {
  tag_ = tag;
  mask_ = 1;
  if (send_ != recv_ && bytes_ > 0) std::memcpy(recv_, send_, bytes_);
  if (mask_ >= size_) return MPI_SUCCESS;
  return PostStep();
}

int RecursiveDoublingAllReduce::Test(bool* done) {
  while (mask_ < size_) {
    int flag = 0;
    int rc = MPI_Testall(2, requests_, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (!flag) {
      *done = false;
      return MPI_SUCCESS;
    }
    // MPI_Reduce_local(in, inout): inout = in (op) inout. Lower rank first.
    const int partner = rank_ ^ mask_;
    if (partner < rank_) {
      rc = MPI_Reduce_local(incoming_.data(), recv_, count_, type_, op_);
    } else {
      rc = MPI_Reduce_local(recv_, incoming_.data(), count_, type_, op_);
      if (rc == MPI_SUCCESS && bytes_ > 0) std::memcpy(recv_, incoming_.data(), bytes_);
    }
    if (rc != MPI_SUCCESS) return rc;
    mask_ <<= 1;
    if (mask_ < size_) {
      rc = PostStep();
      if (rc != MPI_SUCCESS) return rc;
    }
  }
  *done = true;
  return MPI_SUCCESS;
}

}  // namespace dist_mpi

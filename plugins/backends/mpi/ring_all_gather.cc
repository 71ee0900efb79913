#include "ring_all_gather.h"

#include <cstring>

namespace dist_mpi {

RingAllGather::RingAllGather(const void* send, void* recv, int count, MPI_Datatype type,
                             size_t block_bytes, int rank, int size, MPI_Comm comm)
    : send_(send),
      recv_(static_cast<char*>(recv)),
      count_(count),
      type_(type),
      block_bytes_(block_bytes),
      rank_(rank),
      size_(size),
      comm_(comm) {}

char* RingAllGather::Block(int index) const {
  return recv_ + static_cast<size_t>(index) * block_bytes_;
}

int RingAllGather::PostStep() {
  const int left = (rank_ + size_ - 1) % size_;
  const int right = (rank_ + 1) % size_;
  const int incoming = (rank_ - step_ - 1 + 2 * size_) % size_;
  const int outgoing = (rank_ - step_ + size_) % size_;
  int rc = MPI_Irecv(Block(incoming), count_, type_, left, tag_, comm_, &requests_[0]);
  if (rc != MPI_SUCCESS) return rc;
  const void* from = step_ == 0 ? send_ : Block(outgoing);
  return MPI_Isend(from, count_, type_, right, tag_, comm_, &requests_[1]);
}

int RingAllGather::Start(int tag) {
  tag_ = tag;
  step_ = 0;
  char* mine = Block(rank_);
  const bool in_place = send_ == mine;
  if (size_ > 1) {
    const int rc = PostStep();
    if (rc != MPI_SUCCESS) return rc;
  }
  // The local copy runs while the first step's transfer does; no message
  // touches this rank's block.
  if (!in_place && block_bytes_ > 0) std::memcpy(mine, send_, block_bytes_);
  return MPI_SUCCESS;
}

int RingAllGather::Test(bool* done) {
  while (step_ < size_ - 1) {
    int flag = 0;
    const int rc = MPI_Testall(2, requests_, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    if (!flag) {
      *done = false;
      return MPI_SUCCESS;
    }
    if (++step_ < size_ - 1) {
      const int post = PostStep();
      if (post != MPI_SUCCESS) return post;
    }
  }
  *done = true;
  return MPI_SUCCESS;
}

}  // namespace dist_mpi

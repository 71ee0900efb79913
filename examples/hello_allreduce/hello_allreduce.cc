// The README's demo: every rank contributes a vector, the ranks all-reduce
// it, and each rank checks the result against the sum it computes itself.
//
//   distrun -n 4 hello_allreduce            # DIST_BACKEND picks the backend
//   DIST_BACKEND=mpi mpirun -np 4 hello_allreduce
#include <cstdio>
#include <vector>

#include "dist/dist.hpp"

int main() {
  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init();
  if (!group.ok()) {
    std::fprintf(stderr, "hello_allreduce: %s\n", std::string(group.status().message()).c_str());
    return 1;
  }
  const int rank = group->rank();
  const int size = group->world_size();

  // Rank r contributes (r + 1) * (i + 1) at index i.
  constexpr int kCount = 8;
  std::vector<double> values(kCount);
  for (int i = 0; i < kCount; ++i) values[i] = (rank + 1.0) * (i + 1.0);

  absl::Status status = group->AllReduce(dist::View(values), dist::View(values), DIST_SUM);
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d: all_reduce failed: %s\n", rank,
                 std::string(status.message()).c_str());
    return 1;
  }

  // Independent reference: sum over r of (r + 1) is size * (size + 1) / 2.
  const double ranks_sum = size * (size + 1) / 2.0;
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) wrong += values[i] != ranks_sum * (i + 1.0);
  std::printf("rank %d of %d (%s): all_reduce sum -> [%g, %g, ..., %g] %s\n", rank, size,
              group->backend(), values[0], values[1], values[kCount - 1],
              wrong == 0 ? "correct" : "WRONG");
  if (wrong != 0) return 2;
  return group->Barrier().ok() ? 0 : 1;
}

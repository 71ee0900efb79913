// Runs verified all-reduces until `steps` are done or one fails, printing
// one line per step, so that a test can break the network mid-job and see
// what every rank reports. Exit 0: all steps correct; 1: an operation
// failed (its error printed); 2: a wrong result.
//
//   allreduce_loop STEPS [PAUSE_MS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.hpp"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  const int pause_ms = argc > 2 ? std::atoi(argv[2]) : 100;
  absl::StatusOr<dist::ProcessGroup> group = dist::ProcessGroup::Init();
  if (!group.ok()) {
    std::fprintf(stderr, "allreduce_loop: %s\n", std::string(group.status().message()).c_str());
    return 1;
  }
  const int rank = group->rank();
  const int size = group->world_size();
  std::vector<double> values(1024);
  for (int step = 0; step < steps; ++step) {
    // Rank r contributes r + step at every index; the sum is known.
    for (double& v : values) v = rank + step;
    absl::Status status = group->AllReduce(dist::View(values), dist::View(values), DIST_SUM);
    if (!status.ok()) {
      std::fprintf(stderr, "rank %d: all_reduce failed at step %d: %s\n", rank, step,
                   std::string(status.message()).c_str());
      return 1;
    }
    const double expected = size * (size - 1) / 2.0 + static_cast<double>(size) * step;
    for (double v : values) {
      if (v != expected) {
        std::fprintf(stderr, "rank %d: step %d WRONG: %g instead of %g\n", rank, step, v, expected);
        return 2;
      }
    }
    std::printf("rank %d step %d correct\n", rank, step);
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  return 0;
}

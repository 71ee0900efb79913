// mpi:// when rank 0 comes late: the program initializes MPI itself, rank 0
// waits 3 s before dist_init, every rank has a 1 s timeout. The others must
// fail within their timeout naming rank 0 (no hang in the broadcast); rank 0
// then fails its join check naming the ranks that gave up. (Had the others
// waited for rank 0, the broadcast would have completed and they would have
// joined; no time is asserted.) All ranks finish
// MPI cleanly afterwards (rank 0's late broadcast matches theirs).
//   DIST_BACKEND=mpi <launcher> -n N mpi_late_driver
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "dist/dist.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) sleep(3);
  dist_init_options_t options = dist_init_options_default();
  options.timeout_ms = 1000;
  const auto start = std::chrono::steady_clock::now();
  dist_process_group_t* group = nullptr;
  dist_error_t* error = dist_init(&options, &group);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int failures = 0;
  if (error == nullptr) {
    std::fprintf(stderr, "[rank %d] dist_init succeeded although rank 0 was 3 s late\n", rank);
    dist_destroy(group);
    ++failures;
  } else {
    const std::string message = dist_error_message(error);
    std::fprintf(stderr, "[rank %d] after %.2f s: %s\n", rank, seconds, message.c_str());
    // Others: the broadcast's deadline. Rank 0: the join check's.
    const char* want = rank == 0 ? "timed out" : "got no store address from rank 0 within 1000 ms";
    if (message.find(want) == std::string::npos) {
      std::fprintf(stderr, "[rank %d] error lacks '%s'\n", rank, want);
      ++failures;
    }
    if (dist_error_code(error) != DIST_DEADLINE_EXCEEDED) {
      std::fprintf(stderr, "[rank %d] code %d is not DEADLINE_EXCEEDED\n", rank,
                   static_cast<int>(dist_error_code(error)));
      ++failures;
    }
    dist_error_destroy(error);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  if (failures == 0) std::fprintf(stderr, "[rank %d] late rank 0: checks passed\n", rank);
  return failures == 0 ? 0 : 1;
}

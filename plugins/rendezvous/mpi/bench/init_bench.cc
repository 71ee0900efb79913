// What DIST_BACKEND=mpi's dist_init costs against MPI_Init alone, each
// measured from main() to "every rank is ready" (a barrier after it), the
// slowest rank reported. One launch measures one mode, since MPI can be
// initialized once per process; run_init_bench.sh alternates the modes.
//   init_bench mpi     MPI_Init_thread(MULTIPLE) + MPI_Barrier
//   init_bench dist    dist_init (mpi://, the MPI backend) + dist_barrier
//   init_bench split   MPI_Init_thread, then dist_init + dist_barrier on the
//                      initialized MPI: how much of dist_init is not MPI_Init
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "dist/dist.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from) {
  return std::chrono::duration<double>(Clock::now() - from).count();
}

int Fail(dist_error_t* err) {
  std::fprintf(stderr, "init_bench: %s\n", dist_error_message(err));
  dist_error_destroy(err);
  return 1;
}

// dist_init + dist_barrier.
int DistInit(dist_process_group_t** group) {
  if (dist_error_t* err = dist_init(nullptr, group)) return Fail(err);
  if (dist_error_t* err = dist_barrier(*group, nullptr)) return Fail(err);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Clock::time_point start = Clock::now();
  const char* mode = argc > 1 ? argv[1] : "";
  double times[2] = {0, 0};  // total, and (split) the part after MPI_Init
  if (std::strcmp(mode, "mpi") == 0) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Barrier(MPI_COMM_WORLD);
    times[0] = Seconds(start);
    double slowest[2] = {0, 0};
    MPI_Reduce(times, slowest, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::printf("mpi %.6f\n", slowest[0]);
    MPI_Finalize();
    return 0;
  }
  if (std::strcmp(mode, "dist") != 0 && std::strcmp(mode, "split") != 0) {
    std::fprintf(stderr, "usage: init_bench mpi|dist|split (under an MPI launcher)\n");
    return 2;
  }
  const bool split = std::strcmp(mode, "split") == 0;
  Clock::time_point after_mpi = start;
  if (split) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    after_mpi = Clock::now();
  }
  dist_process_group_t* group = nullptr;
  if (int rc = DistInit(&group)) return rc;
  times[0] = Seconds(start);
  times[1] = Seconds(after_mpi);
  dist_buffer_t buffer = dist_make_buffer(times, 2, DIST_FLOAT64, dist_cpu());
  if (dist_error_t* err = dist_all_reduce(group, &buffer, &buffer, DIST_MAX, nullptr)) {
    return Fail(err);
  }
  if (dist_rank(group) == 0) {
    if (split) {
      std::printf("split %.6f %.6f\n", times[0], times[1]);
    } else {
      std::printf("dist %.6f\n", times[0]);
    }
  }
  dist_destroy(group);
  if (split) MPI_Finalize();
  return 0;
}

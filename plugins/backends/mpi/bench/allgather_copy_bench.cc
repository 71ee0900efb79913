// Why libnbc's MPI_Iallgather is slow on shared memory (see
// ../ring_all_gather.h), in raw MPI only, 2 ranks, page-aligned buffers,
// every variant timed in the same run (rounds interleaved):
//   allgather      MPI_Allgather (coll/tuned: sends from the send buffer,
//                  copies the local block meanwhile)
//   iallgather     MPI_Iallgather + MPI_Test loop (libnbc: copies the local
//                  block into recv inside the call, then sends it from recv);
//                  `in_call` is the time spent inside MPI_Iallgather
//   from_send      MPI_Irecv + MPI_Isend from the send buffer, local copy
//                  after posting, MPI_Testall loop (what the plugin's ring
//                  does on 2 ranks)
//   from_recv      the same, but copying into recv first and sending from
//                  there (libnbc's order); `copy` is the memcpy's time
//   copy_after     from_send with the local copy after the messages completed
//   waitall        from_send with MPI_Waitall instead of the MPI_Testall loop
// Time per op = slowest rank, median of the rounds.
//
//   mpirun -np 2 allgather_copy_bench [--bytes=524288] [--rounds=9]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

ABSL_FLAG(int64_t, bytes, 512 << 10, "bytes per rank");
ABSL_FLAG(int, rounds, 9, "rounds per variant (median reported)");
ABSL_FLAG(int, iters, 20, "ops per round");

namespace {

enum Variant { kAllgather, kIallgather, kFromSend, kFromRecv, kCopyAfter, kWaitall, kVariants };
const char* const kNames[] = {"allgather", "iallgather", "from_send",
                              "from_recv", "copy_after", "waitall"};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "run with mpirun -np 2\n");
    MPI_Finalize();
    return 2;
  }
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_bytes));
  const int n = static_cast<int>(bytes / sizeof(float));
  const int iters = absl::GetFlag(FLAGS_iters);
  void* send_memory = nullptr;
  void* recv_memory = nullptr;
  if (posix_memalign(&send_memory, 4096, bytes) != 0 ||
      posix_memalign(&recv_memory, 4096, 2 * bytes) != 0) {
    MPI_Abort(comm, 1);
  }
  auto* send = static_cast<float*>(send_memory);
  auto* recv = static_cast<float*>(recv_memory);
  for (int i = 0; i < n; ++i) send[i] = static_cast<float>((3 * i + 7 * rank) % 5 + 1);
  std::memset(recv, 0, 2 * bytes);
  float* mine = recv + static_cast<size_t>(rank) * n;
  float* theirs = recv + static_cast<size_t>(1 - rank) * n;
  const int peer = 1 - rank;

  std::vector<double> times[kVariants];
  std::vector<double> inner[kVariants];
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds) + 1; ++round) {
    for (int v = 0; v < kVariants; ++v) {
      MPI_Barrier(comm);
      double inside = 0;
      const double start = MPI_Wtime();
      for (int it = 0; it < iters; ++it) {
        MPI_Request requests[2];
        int done = 0;
        if (v == kAllgather) {
          MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm);
        } else if (v == kIallgather) {
          const double t = MPI_Wtime();
          MPI_Iallgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm, &requests[0]);
          inside += MPI_Wtime() - t;
          while (!done) MPI_Test(&requests[0], &done, MPI_STATUS_IGNORE);
        } else {
          const float* from = send;
          if (v == kFromRecv) {
            const double t = MPI_Wtime();
            std::memcpy(mine, send, bytes);
            inside += MPI_Wtime() - t;
            from = mine;
          }
          MPI_Irecv(theirs, n, MPI_FLOAT, peer, 7, comm, &requests[0]);
          MPI_Isend(from, n, MPI_FLOAT, peer, 7, comm, &requests[1]);
          if (v == kFromSend || v == kWaitall) {
            const double t = MPI_Wtime();
            std::memcpy(mine, send, bytes);
            inside += MPI_Wtime() - t;
          }
          if (v == kWaitall) {
            MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
          } else {
            while (!done) MPI_Testall(2, requests, &done, MPI_STATUSES_IGNORE);
          }
          if (v == kCopyAfter) {
            const double t = MPI_Wtime();
            std::memcpy(mine, send, bytes);
            inside += MPI_Wtime() - t;
          }
        }
      }
      double local[2] = {(MPI_Wtime() - start) / iters, inside / iters};
      double slowest[2];
      MPI_Allreduce(local, slowest, 2, MPI_DOUBLE, MPI_MAX, comm);
      if (round > 0) {  // the first round warms up
        times[v].push_back(slowest[0]);
        inner[v].push_back(slowest[1]);
      }
    }
  }
  if (rank == 0) {
    std::printf("%zu bytes per rank, 2 ranks, median of %d rounds x %d ops\n", bytes,
                absl::GetFlag(FLAGS_rounds), iters);
    std::printf("%-11s %10s %8s %12s\n", "variant", "time_us", "x_raw", "in_call/copy");
    const double raw = Median(times[kAllgather]);
    for (int v = 0; v < kVariants; ++v) {
      std::printf("%-11s %10.1f %8.2f", kNames[v], Median(times[v]) * 1e6, Median(times[v]) / raw);
      if (v != kAllgather) std::printf(" %12.1f", Median(inner[v]) * 1e6);
      std::printf("\n");
    }
  }
  std::free(send_memory);
  std::free(recv_memory);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}

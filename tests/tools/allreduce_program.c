/* A real dist program for distrun's tests: dist_init(NULL) takes everything
 * from the environment distrun sets (env://, DIST_BACKEND), all-reduces
 * rank + 1 and prints the result. With an argument N, rank N exits with
 * code 3 before the all-reduce, to see how the others and distrun react. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "dist/dist.h"

int main(int argc, char** argv) {
  int die_rank = argc > 1 ? atoi(argv[1]) : -1;
  dist_process_group_t* pg = NULL;
  dist_error_t* err = dist_init(NULL, &pg);
  if (err != NULL) {
    fprintf(stderr, "dist_init: %s\n", dist_error_message(err));
    dist_error_destroy(err);
    return 1;
  }
  int rank = dist_rank(pg), world = dist_world_size(pg);
  if (rank == die_rank) {
    printf("rank %d exits early\n", rank);
    fflush(stdout);
    _exit(3); /* dies as a crashed rank would: no cleanup, no atexit */
  }
  double value = rank + 1;
  dist_buffer_t b = dist_make_buffer(&value, 1, DIST_FLOAT64, dist_cpu());
  err = dist_all_reduce(pg, &b, &b, DIST_SUM, NULL);
  if (err != NULL) {
    fprintf(stderr, "all_reduce: %s\n", dist_error_message(err));
    dist_error_destroy(err);
    dist_destroy(pg);
    return 1;
  }
  printf("rank %d of %d backend %s sum %g\n", rank, world, dist_backend_name(pg, DIST_DEVICE_CPU),
         value);
  dist_destroy(pg);
  return 0;
}

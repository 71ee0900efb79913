/* A real dist program for distrun --survive: dist_init(NULL) takes
 * everything from the environment distrun sets. The ranks all-reduce
 * rank + 1 until the group fails; rank VICTIM (the argument) SIGKILLs itself
 * before the fourth. The survivors shrink the group and all-reduce their old
 * rank + 1 on it, printing "rank R: rank r of n after the shrink, sum S" for
 * the test to check against the survivors it knows.
 * Under distrun --max_restarts (DIST_MAX_RESTARTS set) the survivors then
 * grow back to WORLD_SIZE, admitting the restarted processes (DIST_JOIN=1,
 * whose dist_init returns the grown group), and every rank all-reduces its
 * rank + 1 in the grown group, printing "rank r of n after the grow, sum S"
 * (prefixed "rank R: " on survivors, "joined: " on joiners). Any other outcome is
 * one line on stderr and exit code 1. Every path destroys what it made (the
 * sanitizer builds count a group left behind as a leak). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist/dist.h"

enum { kIterationsBefore = 3, kMaxIterations = 1000 };

/* Prints WHAT: the error's code and message, takes the error, returns 1. */
static int Fail(const char* what, dist_error_t* err) {
  fprintf(stderr, "%s: %s: %s\n", what, dist_error_code_name(dist_error_code(err)),
          dist_error_message(err));
  dist_error_destroy(err);
  return 1;
}

/* The loop until the group fails; 0 when it failed as it should. */
static int UntilFailure(dist_process_group_t* group, int victim) {
  const int rank = dist_rank(group), world = dist_world_size(group);
  for (int iter = 0; iter < kMaxIterations; ++iter) {
    if (rank == victim && iter == kIterationsBefore) {
      printf("rank %d: SIGKILL\n", rank);
      fflush(stdout);
      raise(SIGKILL);
    }
    double value = rank + 1;
    dist_buffer_t b = dist_make_buffer(&value, 1, DIST_FLOAT64, dist_cpu());
    dist_error_t* err = dist_all_reduce(group, &b, &b, DIST_SUM, NULL);
    if (err != NULL) {
      const dist_error_code_t code = dist_error_code(err);
      /* The failure: the group revoked by the failure detector, or the
       * backend's lost connection to the dead rank, whichever came first. */
      if (iter < kIterationsBefore || (code != DIST_REVOKED && code != DIST_UNAVAILABLE)) {
        return Fail("all_reduce", err);
      }
      dist_error_destroy(err);
      return 0;
    }
    if (value != world * (world + 1) / 2) {
      fprintf(stderr, "all_reduce %d: %g, want %d\n", iter, value, world * (world + 1) / 2);
      return 1;
    }
  }
  fprintf(stderr, "rank %d: the group never failed\n", rank);
  return 1;
}

/* All-reduces rank + 1 on the grown group and prints the line. */
static int OnGrown(dist_process_group_t* grown, const char* who) {
  double value = dist_rank(grown) + 1;
  dist_buffer_t b = dist_make_buffer(&value, 1, DIST_FLOAT64, dist_cpu());
  dist_error_t* err = dist_all_reduce(grown, &b, &b, DIST_SUM, NULL);
  if (err != NULL) return Fail("all_reduce after the grow", err);
  printf("%srank %d of %d after the grow, sum %g\n", who, dist_rank(grown), dist_world_size(grown),
         value);
  fflush(stdout);
  return 0;
}

/* The survivors admit as many joiners as ranks were lost. */
static int GrowBack(dist_process_group_t* shrunk, int rank) {
  const char* world_text = getenv("WORLD_SIZE");
  const int world = world_text != NULL ? atoi(world_text) : 0;
  dist_grow_options_t options = {sizeof(dist_grow_options_t), 0, world - dist_world_size(shrunk)};
  dist_process_group_t* grown = NULL;
  dist_error_t* err = dist_grow(shrunk, &options, &grown);
  if (err != NULL) return Fail("dist_grow", err);
  char who[32];
  snprintf(who, sizeof(who), "rank %d: ", rank);
  const int code = OnGrown(grown, who);
  dist_destroy(grown);
  return code;
}

/* Shrinks `group` and all-reduces on the survivors' group. */
static int AfterFailure(dist_process_group_t* group) {
  const int rank = dist_rank(group);
  dist_process_group_t* shrunk = NULL;
  dist_error_t* err = dist_shrink(group, NULL, &shrunk);
  if (err != NULL) return Fail("dist_shrink", err);
  double value = rank + 1;
  dist_buffer_t b = dist_make_buffer(&value, 1, DIST_FLOAT64, dist_cpu());
  err = dist_all_reduce(shrunk, &b, &b, DIST_SUM, NULL);
  if (err != NULL) {
    dist_destroy(shrunk);
    return Fail("all_reduce after the shrink", err);
  }
  printf("rank %d: rank %d of %d after the shrink, sum %g\n", rank, dist_rank(shrunk),
         dist_world_size(shrunk), value);
  fflush(stdout);
  const char* restarts = getenv("DIST_MAX_RESTARTS");
  const int code = restarts != NULL && atoi(restarts) > 0 ? GrowBack(shrunk, rank) : 0;
  dist_destroy(shrunk);
  return code;
}

int main(int argc, char** argv) {
  const int victim = argc > 1 ? atoi(argv[1]) : -1;
  dist_process_group_t* group = NULL;
  dist_error_t* err = dist_init(NULL, &group);
  if (err != NULL) return Fail("dist_init", err);
  const char* join = getenv("DIST_JOIN");
  if (join != NULL && atoi(join) == 1) { /* restarted: admitted into the grown group */
    const int code = OnGrown(group, "joined: ");
    dist_destroy(group);
    return code;
  }
  int code = UntilFailure(group, victim);
  if (code == 0) code = AfterFailure(group);
  dist_destroy(group);
  return code;
}

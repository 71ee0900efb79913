/* A dist program whose last rank misbehaves at its third operation, for the
 * desync tests (desync_test.sh):
 *
 *   desync_program SCENARIO
 *     ok        every rank: all_reduce #1, broadcast #2, all_reduce #3, barrier #4
 *     skip      the last rank skips all_reduce #3 and leaves
 *     other_op  the last rank calls broadcast(root 0, 2048 x float32) as #3
 *     count     the last rank all-reduces 2048 floats as #3
 *     dtype     the last rank all-reduces 1024 int32 as #3
 *     stop      the last rank stops itself (SIGSTOP) before #3 and, once
 *               continued, calls all_reduce #3 late
 *
 * Every rank writes its flight recorder on demand (dist_trace_dump) before it
 * leaves, so that disttrace sees even the ranks that did not fail. Prints
 * "rank R: FAILED op: message" and exits 3 when a dist call fails, "rank R:
 * ok" and 0 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <dist/dist.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int Fail(int rank, const char* op, dist_error_t* err) {
  printf("rank %d: FAILED %s: %s\n", rank, op, dist_error_message(err));
  fflush(stdout);
  dist_error_destroy(err);
  return 3;
}

int main(int argc, char** argv) {
  const char* scenario = argc > 1 ? argv[1] : "ok";
  dist_process_group_t* group = NULL;
  dist_error_t* err = dist_init(NULL, &group);
  if (err != NULL) return Fail(-1, "dist_init", err);
  const int rank = dist_rank(group);
  const int size = dist_world_size(group);
  const int odd = rank == size - 1;
  static float data[2048];
  static int32_t ints[1024];
  int status = 0;

  for (int i = 0; i < 1024; ++i) data[i] = (float)(rank + i);
  dist_buffer_t b = dist_make_buffer(data, 1024, DIST_FLOAT32, dist_cpu());
  if ((err = dist_all_reduce(group, &b, &b, DIST_SUM, NULL)) != NULL) {
    status = Fail(rank, "all_reduce #1", err);
    goto out;
  }
  /* sum over ranks r of (r + i) */
  const float expected = (float)(size * (size - 1) / 2);
  if (data[0] != expected || data[5] != expected + 5.0f * size) {
    printf("rank %d: WRONG all_reduce #1: %g, expected %g\n", rank, data[0], expected);
    status = 4;
    goto out;
  }
  if ((err = dist_broadcast(group, &b, &b, 0, NULL)) != NULL) {
    status = Fail(rank, "broadcast #2", err);
    goto out;
  }

  if (odd && strcmp(scenario, "skip") == 0) {
    printf("rank %d: skipping all_reduce #3\n", rank);
    goto out;
  }
  if (odd && strcmp(scenario, "stop") == 0) {
    printf("rank %d: stopping before all_reduce #3 (pid %d)\n", rank, (int)getpid());
    fflush(stdout);
    raise(SIGSTOP);
    printf("rank %d: continued\n", rank);
  }
  if (odd && strcmp(scenario, "other_op") == 0) {
    dist_buffer_t big = dist_make_buffer(data, 2048, DIST_FLOAT32, dist_cpu());
    err = dist_broadcast(group, &big, &big, 0, NULL);
  } else if (odd && strcmp(scenario, "count") == 0) {
    dist_buffer_t big = dist_make_buffer(data, 2048, DIST_FLOAT32, dist_cpu());
    err = dist_all_reduce(group, &big, &big, DIST_SUM, NULL);
  } else if (odd && strcmp(scenario, "dtype") == 0) {
    dist_buffer_t i32 = dist_make_buffer(ints, 1024, DIST_INT32, dist_cpu());
    err = dist_all_reduce(group, &i32, &i32, DIST_SUM, NULL);
  } else {
    err = dist_all_reduce(group, &b, &b, DIST_SUM, NULL);
  }
  if (err != NULL) {
    status = Fail(rank, "operation #3", err);
    goto out;
  }
  if ((err = dist_barrier(group, NULL)) != NULL) {
    status = Fail(rank, "barrier #4", err);
    goto out;
  }
  printf("rank %d: ok\n", rank);

out:
  if (getenv("DIST_TRACE_DIR") != NULL && (err = dist_trace_dump(group, NULL)) != NULL) {
    printf("rank %d: FAILED dist_trace_dump: %s\n", rank, dist_error_message(err));
    dist_error_destroy(err);
  }
  fflush(stdout);
  dist_destroy(group);
  /* Under mpirun a failing rank would end the job before a stopped one is
   * continued. */
  if (getenv("DESYNC_EXIT_ZERO") != NULL && *getenv("DESYNC_EXIT_ZERO") != '\0') return 0;
  return status;
}

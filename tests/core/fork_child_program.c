/* A host that fork()s after dist_init, as servers and data loaders do, for
 * fork_child_test (distrun: gloo, shm) and tests/mpi (mpirun: mpi).
 *
 *   fork_child_program exit   the child exits at once with exit(0): atexit
 *                             handlers and static destructors run in it
 *   fork_child_program use    the child tries its parent's group and an
 *                             operation in flight: every call must fail with
 *                             FAILED_PRECONDITION naming the fork, and abort
 *                             and destroy must leave them alone
 *
 * Either way the parent then waits (at most 30 s) for its child, finishes
 * the operation in flight and runs 20 all_reduces, each checked against
 * the sum computed here. Exit 0 only if all of it held. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist.h"

static int rank = -1;

/* 1 if error is FAILED_PRECONDITION and says this process is a fork. */
static int RefusedAsFork(const char* what, dist_error_t* error) {
  int ok = error != NULL && dist_error_code(error) == DIST_FAILED_PRECONDITION &&
           strstr(dist_error_message(error), "is a fork() of it") != NULL;
  if (!ok) {
    fprintf(stderr, "rank %d child: %s: wanted a refusal naming the fork, got %s\n", rank, what,
            error == NULL ? "success" : dist_error_message(error));
  }
  dist_error_destroy(error);
  return ok;
}

static int InChild(const char* mode, dist_process_group_t* pg, dist_work_t* work) {
  if (strcmp(mode, "exit") == 0) exit(0);
  double value = 1;
  dist_buffer_t b = dist_make_buffer(&value, 1, DIST_FLOAT64, dist_cpu());
  int ok = RefusedAsFork("dist_all_reduce", dist_all_reduce(pg, &b, &b, DIST_SUM, NULL));
  ok &= RefusedAsFork("dist_barrier", dist_barrier(pg, NULL));
  dist_work_t* async = NULL;
  ok &= RefusedAsFork("dist_broadcast", dist_broadcast(pg, &b, &b, 0, &async));
  ok &= RefusedAsFork("dist_sendrecv", dist_sendrecv(pg, &b, 0, &b, 0, 7));
  int32_t members[1] = {0};
  dist_process_group_t* sub = NULL;
  ok &= RefusedAsFork("dist_new_group", dist_new_group(pg, members, 1, &sub));
  ok &= RefusedAsFork("dist_work_wait", dist_work_wait(work, 1000));
  int done = 0;
  ok &= RefusedAsFork("dist_work_test", dist_work_test(work, &done));
  ok &= RefusedAsFork("dist_trace_dump", dist_trace_dump(pg, "/dev/null"));
  /* Neither may touch what the parent still uses. */
  dist_work_destroy(work);
  dist_abort(pg, "the child aborts its copy");
  dist_destroy(pg);
  printf("rank %d child: every call refused\n", rank);
  exit(ok ? 0 : 2);
}

/* waitpid with a bound; kills a child still running after `seconds`. */
static int WaitChild(pid_t child, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    int status = 0;
    pid_t got = waitpid(child, &status, WNOHANG);
    if (got == child) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      fprintf(stderr, "rank %d: the child died of signal %d\n", rank, WTERMSIG(status));
      return 1;
    }
    struct timespec tick = {0, 10 * 1000 * 1000};
    nanosleep(&tick, NULL);
  }
  fprintf(stderr, "rank %d: the child still ran after %d s (hung): killed\n", rank, seconds);
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  return 1;
}

static int Fail(const char* what, dist_error_t* error) {
  fprintf(stderr, "rank %d: %s: %s\n", rank, what, dist_error_message(error));
  dist_error_destroy(error);
  return 1;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "use";
  setvbuf(stdout, NULL, _IONBF, 0);
  dist_process_group_t* pg = NULL;
  dist_error_t* error = dist_init(NULL, &pg);
  if (error != NULL) return Fail("dist_init", error);
  rank = dist_rank(pg);
  const int world = dist_world_size(pg);
  /* In flight across the fork. */
  double in_flight = rank + 1;
  dist_buffer_t b = dist_make_buffer(&in_flight, 1, DIST_FLOAT64, dist_cpu());
  dist_work_t* work = NULL;
  error = dist_all_reduce(pg, &b, &b, DIST_SUM, &work);
  if (error != NULL) return Fail("dist_all_reduce", error);

  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) InChild(mode, pg, work);
  const int child_status = WaitChild(child, 30);
  if (child_status != 0) {
    fprintf(stderr, "rank %d: the child exited %d\n", rank, child_status);
    return 1;
  }
  printf("rank %d: the child exited 0\n", rank);

  error = dist_work_wait(work, -1);
  if (error != NULL) return Fail("dist_work_wait", error);
  dist_work_destroy(work);
  int wrong = in_flight != world * (world + 1) / 2.0;
  for (int round = 1; round <= 20; ++round) {
    double value = rank + round;
    b = dist_make_buffer(&value, 1, DIST_FLOAT64, dist_cpu());
    error = dist_all_reduce(pg, &b, &b, DIST_SUM, NULL);
    if (error != NULL) return Fail("dist_all_reduce after the fork", error);
    wrong += value != world * (world - 1) / 2.0 + (double)world * round;
  }
  error = dist_barrier(pg, NULL);
  if (error != NULL) return Fail("dist_barrier", error);
  dist_destroy(pg);
  if (wrong != 0) {
    fprintf(stderr, "rank %d: %d sums wrong after the fork\n", rank, wrong);
    return 1;
  }
  printf("rank %d: 21 all_reduces after the fork correct\n", rank);
  return 0;
}

/* A host program built outside Bazel with a plain compiler and pkg-config
 * against an installed dist: it picks the backend at run time (DIST_BACKEND)
 * and checks an all-reduce and a broadcast. */
#include <dist/dist.h>
#include <dist/registry.h>
#include <stdio.h>

int main(void) {
  dist_process_group_t* group = NULL;
  dist_error_t* error = dist_init(NULL, &group);
  if (error != NULL) {
    fprintf(stderr, "host: %s\n", dist_error_message(error));
    dist_error_destroy(error);
    return 1;
  }
  int rank = dist_rank(group), size = dist_world_size(group);
  int64_t values[3] = {rank + 1, 10 * (rank + 1), -(rank + 1)};
  dist_buffer_t buffer = dist_make_buffer(values, 3, DIST_INT64, dist_cpu());
  error = dist_all_reduce(group, &buffer, &buffer, DIST_SUM, NULL);
  int64_t total = (int64_t)size * (size + 1) / 2;
  int ok = error == NULL && values[0] == total && values[1] == 10 * total && values[2] == -total;
  double token = rank == 0 ? 2.5 : 0.0;
  dist_buffer_t one = dist_make_buffer(&token, 1, DIST_FLOAT64, dist_cpu());
  if (error == NULL) error = dist_broadcast(group, &one, &one, 0, NULL);
  ok = ok && error == NULL && token == 2.5;
  printf("host rank %d/%d backend %s core %s: %s\n", rank, size,
         dist_backend_name(group, DIST_DEVICE_CPU), dist_version(), ok ? "ok" : "WRONG");
  if (error != NULL) fprintf(stderr, "host: %s\n", dist_error_message(error));
  dist_error_destroy(error);
  dist_destroy(group);
  return ok ? 0 : 2;
}
